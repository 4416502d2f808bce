"""bench/fleet/report.py renders what bench/fleet/part.py computes: every size, load and strategy, and the plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fleet import part
from bench.fleet.measured import Measured
from bench.fleet.report import plot, render
from bench.fleet.strategies import STRATEGIES

MEASURED = Measured((2.0, 2.2), (4.3, 4.4), (7.0, 7.4), (1.0, 1.1), (1.1, 1.3), (0.5, 2.0), ("synthetic pools",))


@pytest.fixture(scope="module")
def section() -> dict:
    settings = dict(part.settings(quick=True), sizes=[4], seeds=2, mix_size=4)
    return {"settings": settings, "measured": MEASURED.as_dict(), **part.grid((4,), 2, MEASURED, None),
            "mix": part.mix_sweep(4, 2, MEASURED), "deletions": [], "calibration": [], "real_roll": []}


def test_every_strategy_has_a_row_per_load_and_the_target_is_judged(section: dict) -> None:
    text = "\n".join(render(section)).split("### 4 replicas", 1)[1]  # the tables, not the strategies' list
    assert "Scale-down of the 4 to 2" in text
    for strategy in STRATEGIES:
        assert text.count(f"| {strategy.name} |") == 2 * len(section["settings"]["loads"])  # rollout + scale-down
    assert text.count("**target met") + text.count("**finding") == len(section["settings"]["loads"])


def test_the_same_seed_gives_the_same_figures(section: dict) -> None:
    again = part.grid((4,), 2, MEASURED, None)
    assert again["rollouts"] == section["rollouts"]


def test_the_plot_is_a_png(section: dict, tmp_path: Path) -> None:
    path = plot(section, tmp_path / "mix.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_report_elsewhere_gets_its_plot_beside_it_where_its_link_points(section: dict, tmp_path: Path,
                                                                         monkeypatch) -> None:
    """A --quick run's report is not the record's: its plot must not replace bench/fleet's tracked one."""
    from bench import run
    from bench.fleet import part as fleet_part
    from bench.fleet.report import PLOT, PLOT_LINK

    before = PLOT.stat().st_mtime_ns
    monkeypatch.setattr(fleet_part, "measure", lambda *args, **kwargs: section)
    monkeypatch.setattr(run, "fleet_measured", lambda results: MEASURED)
    report = tmp_path / "quick" / "RESULTS.md"
    run.run_fleet({}, Path("prestop"), True, report)
    assert (report.parent / PLOT_LINK).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert PLOT.stat().st_mtime_ns == before


def test_the_fleet_part_without_the_drain_figures_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    from bench import run

    assert run.main(["--parts", "fleet", "--json", str(tmp_path / "none.json"), "--out", str(tmp_path / "R.md")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--parts fleet" in error and "'drain'" in error and not (tmp_path / "R.md").exists()


def test_the_real_engine_timings_get_their_own_rollout_table_and_pools_beside_the_emulators(section: dict) -> None:
    real = Measured((0.4,), (4.6,), (5.5,), (1.05,), (1.3,), (0.5, 2.0), ("abort exit lag: 1 real vLLM deletion",))
    with_real = {**section, "real_engine": {"size": 4, "measured": real.as_dict(), **part.grid((4,), 2, real, None)}}
    text = "\n".join(render(with_real)).split("### 4 replicas on real vLLM's timings", 1)[1]
    assert "abort exit lag: 1 real vLLM deletion" in text
    assert "| teardown after drain | 5.50 | 1 | 7.20 (7.00–7.40) |" in text
    for strategy in STRATEGIES:
        assert text.count(f"| {strategy.name} |") == len(section["settings"]["loads"])  # its rollout rows
    assert "### 4 replicas on real vLLM's timings" not in "\n".join(render(section))


def test_two_sets_of_pools_see_the_same_requests_seed_by_seed() -> None:
    """The real-engine grid differs from the emulator's by its timings alone: a cut count that moved
    would be the requests drawn anew, not the engine."""
    other = Measured((0.4, 0.5, 0.9), (4.6,), (5.5,), (1.05, 1.02), (1.3,), (0.5, 2.0), ())
    load = part.LOADS[1]
    ours = part.deletion_outcomes(6, load, 0, MEASURED, STRATEGIES)
    theirs = part.deletion_outcomes(6, load, 0, other, STRATEGIES)
    for strategy in ("no hook", "sleep 5", "prestop"):
        assert [o.cut for o in ours[strategy]] == [o.cut for o in theirs[strategy]]
        assert [o.completed for o in ours[strategy]] == [o.completed for o in theirs[strategy]]
    assert [o.exited_at_s for o in ours["prestop"]] != [o.exited_at_s for o in theirs["prestop"]]
