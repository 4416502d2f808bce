"""A bench run outside `make bench` merges its part into the record and renders RESULTS.md again."""

from __future__ import annotations

import json

from bench import report


def test_a_merged_part_replaces_its_own_and_keeps_the_others(tmp_path, monkeypatch):
    record = json.loads(report.DEFAULT_JSON.read_text())
    monkeypatch.setattr(report, "DEFAULT_JSON", tmp_path / "results.json")
    monkeypatch.setattr(report, "DEFAULT_MD", tmp_path / "RESULTS.md")
    report.DEFAULT_JSON.write_text(json.dumps(record))
    routerless = dict(record["routerless"], command="python -m bench.drains.routerless (merged here)")
    report.merge("routerless", routerless)
    merged = json.loads(report.DEFAULT_JSON.read_text())
    assert merged == dict(record, routerless=routerless)
    assert report.DEFAULT_MD.read_text() == report.render(merged)
    assert "`python -m bench.drains.routerless (merged here)`" in report.DEFAULT_MD.read_text()
