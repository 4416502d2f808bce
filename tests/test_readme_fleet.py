"""README's fleet paragraph is bench/results.json's fleet part: each figure it quotes, recomputed
from the record, so a rerun that moves a figure fails here until the README says the new one."""

from __future__ import annotations

import json
import statistics

import pytest

from bench.fleet.part import ROLLOUTS
from tests.conftest import REPO

SIZE, SHORT, MIXED = 100, "short chat", "mixed tail"
PRESTOP, KSERVE = "prestop", "KServe LLMInferenceService (sleep 15, G = 60, --shutdown-timeout 40)"
LLM_D = "llm-d guide (sleep 15, G = 75, --shutdown-timeout 45)"
IE, NO_HOOK, PRESTOP_130 = "Inference Extension manifest (sleep 30, G = 130)", "no hook", "prestop, G = 130"


@pytest.fixture(scope="module")
def fleet() -> dict:
    return json.loads((REPO / "bench" / "results.json").read_text())["fleet"]


@pytest.fixture(scope="module")
def paragraph() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("Per fleet (")
    return " ".join(text[start:text.index("The same file records", start)].split())


def row(rows: list[dict], load: str, strategy: str) -> dict:
    (found,) = [r for r in rows if r["size"] == SIZE and r["load"] == load and r["strategy"] == strategy
                and r["rollout"] == ROLLOUTS[0].name and r["startup"] == ROLLOUTS[0].startup.name]
    return found


def hours(r: dict) -> str:
    return f"{statistics.median(r['wall_s']) / 3600:.2f} h"


def test_the_rollout_figures_are_the_records(fleet: dict, paragraph: str) -> None:
    rollouts = fleet["rollouts"]
    prestop = row(rollouts, SHORT, PRESTOP)
    walls = sorted(w / 3600 for w in prestop["wall_s"])
    assert f"{hours(prestop)} ({walls[0]:.2f}–{walls[-1]:.2f})" in paragraph
    assert hours(row(rollouts, SHORT, KSERVE)) == hours(row(rollouts, SHORT, LLM_D))
    for strategy in (KSERVE, IE, NO_HOOK):
        assert hours(row(rollouts, SHORT, strategy)) in paragraph, strategy
    held = {s: f"{statistics.median(row(rollouts, SHORT, s)['held_idle_h']):.2f}" for s in (PRESTOP, KSERVE, IE, NO_HOOK)}
    assert f"holds {held[PRESTOP]} accelerator-hours idle against {held[KSERVE]}–{held[IE]}" in paragraph
    assert f"{held[NO_HOOK]} accelerator-hours, {statistics.median(row(rollouts, SHORT, NO_HOOK)['cut']):.0f} " \
           "requests cut" in paragraph
    assert f"prestop at G = 30 cuts {statistics.median(row(rollouts, MIXED, PRESTOP)['cut']):.0f}" in paragraph
    assert f"KServe's setting fails {statistics.median(row(rollouts, MIXED, KSERVE)['failed']):.0f}" in paragraph
    assert f"that rollout takes {hours(row(rollouts, MIXED, PRESTOP_130))}" in paragraph


def test_the_real_engine_timings_figures_are_the_records(fleet: dict, paragraph: str) -> None:
    rollouts = fleet["real_engine"]["rollouts"]
    held = [f"{statistics.median(row(rollouts, SHORT, s)['held_idle_h']):.2f}" for s in (PRESTOP, KSERVE)]
    assert (f"gives {hours(row(rollouts, SHORT, PRESTOP))} against {hours(row(rollouts, SHORT, KSERVE))}, "
            f"{held[0]} against {held[1]} accelerator-hours") in paragraph


def test_the_honesty_claims_are_the_records(fleet: dict, paragraph: str) -> None:
    rows = fleet["calibration"]
    inside = sum(all(r[f"{k}_inside"] for k in ("exit_s", "held_idle_s", "lost")) for r in rows)
    assert f"({inside} of {len(rows)} strategy-and-load rows)" in paragraph and inside == len(rows)
    rolled = {e["real"]["strategy"] for e in fleet["real_roll"]}
    assert rolled == {"prestop", "sleep 5"}
    assert all(e["simulated"]["wall_within"] and e["simulated"]["held_idle_within"] for e in fleet["real_roll"])
    assert f"{fleet['cpu']['wall_s'] / 60:.1f} min alone" in paragraph
