"""Every relative link in the pages a reader follows lands on a file, and every #anchor on a
heading of that file, as GitHub renders headings into anchors: a page moved or a heading reworded
breaks a link silently otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted({REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("modeldrain/*/README.md"),
                *REPO.glob("bench/*.md"), *REPO.glob("conformance/*/README.md")})
FENCE = re.compile(r"```.*?```", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#+\s+(.*)$", re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation gone, spaces to -."""
    text = re.sub(r"[`*_]", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        name = slug(heading)
        found.add(name if name not in seen else f"{name}-{seen[name]}")
        seen[name] = seen.get(name, 0) + 1
    return found


def test_slug_follows_githubs_rule():
    assert slug("## `modeldrain lint`: check a manifest before a deletion does".lstrip("# ")) == \
        "modeldrain-lint-check-a-manifest-before-a-deletion-does"
    assert slug("What counts as work (`modeldrain/hook/gauges.py`, the one definition)") == \
        "what-counts-as-work-modeldrainhookgaugespy-the-one-definition"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_lands(page: Path):
    broken = []
    for link in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):
            continue  # an address outside the repository
        path, _, fragment = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link} (no such file)")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            broken.append(f"{link} (no such heading)")
    assert not broken, f"{page.relative_to(REPO)}: {broken}"
