"""bench/costs/sidecar.py measures a real sidecar start, and the report shows it."""

from __future__ import annotations

from bench import report
from bench.costs import sidecar as cost_sidecar
from bench.paths import SIDECAR_CONSOLE_SCRIPT


def test_one_start_is_measured_and_rendered():
    result = cost_sidecar.measure({"console script": SIDECAR_CONSOLE_SCRIPT}, runs=1)
    runs = result["executables"]["console script"]
    assert runs["failures"] == []
    assert len(runs["listening_s"]) == 1 and 0 < runs["listening_s"][0] <= runs["first_answer_s"][0] < 30
    assert runs["version"].startswith("drain-sidecar ")
    assert "aiohttp/" in runs["footprint"]["parts"] and "uvloop/" in runs["footprint"]["parts"]
    if result["gnu_time"]:
        assert runs["max_rss_kib"][0] > 10_000 and runs["session_hwm_kib"][0] >= runs["max_rss_kib"][0] * 0.9
    assert runs["unpacked_bytes"] in ([], [0])  # a console script unpacks nothing
    section = "\n".join(report._sidecar_start_section(result))
    assert "| console script |" in section and "exec → listening" in section
