"""RESULTS.md's "What a fleet saves" section, and its plot (held accelerator-hours against the mix).

    python -m bench.fleet.report [bench/results.json]   # redraw the plot from the recorded figures

The plot needs matplotlib, a bench-only dependency (`pip install -e '.[bench]'`, which `make bench`
does); the tables do not.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Sequence

from bench.fleet.measured import POOLS, pool_label
from bench.fleet.verdict import Row, judge
from bench.spread import Spread
from bench.tables import DASH, MIN_SECONDS_DIFFERENCE, table

HERE = Path(__file__).resolve().parent
PLOT = HERE / "held-idle-vs-mix.png"  # the record's: bench/RESULTS.md links it
PLOT_LINK = "fleet/held-idle-vs-mix.png"  # relative to the report that links it
SECONDS_PER_HOUR = 3600.0


def _h(values: Sequence[float], digits: int = 2) -> str:
    return Spread.of([v / SECONDS_PER_HOUR for v in values]).text(digits)


def _n(values: Sequence[float]) -> str:
    spread = Spread.of(values)
    if spread.n < 2 or spread.low == spread.high:
        return f"{spread.median:.0f}"
    return f"{spread.median:.0f} ({spread.low:.0f}{DASH}{spread.high:.0f})"


def _select(rows: list[dict], **match: object) -> list[dict]:
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def _one(rows: list[dict], **match: object) -> dict:
    found = _select(rows, **match)
    if len(found) != 1:
        raise ValueError(f"results.json's fleet part has {len(found)} rows for {match}")
    return found[0]


def _rollout_table(section: dict, size: int) -> list[str]:
    rollouts = section["settings"]["rollouts"]
    header = ["load", "strategy", *(f"rollout, h ({r['short']})" for r in rollouts),
              "held idle, accelerator-h", "cut", "failed"]
    lines_rows, verdicts = [], []
    for load in section["settings"]["loads"]:
        judged = []
        for i, strategy in enumerate(section["settings"]["strategies"]):
            cells = [_one(section["rollouts"], size=size, load=load["name"], strategy=strategy["name"],
                          rollout=r["name"], startup=r["startup"]) for r in rollouts]
            first = cells[0]
            lines_rows.append([load["name"] if i == 0 else "", strategy["name"],
                               *(_h(c["wall_s"]) for c in cells), Spread.of(first["held_idle_h"]).text(2),
                               _n(first["cut"]), _n(first["failed"])])
            judged.append(Row(strategy["name"], first["wall_s"], first["held_idle_h"], first["cut"], first["failed"]))
        verdicts.append(f"- {load['name']}: {judge(judged)[1]}")
    return [*table(header, lines_rows, "ll" + "r" * (len(header) - 2)), "",
            f"Against the target (the first rollout column, paired by seed over {section['settings']['seeds']} seeds):",
            "", *verdicts, ""]


def _scale_down_table(section: dict, size: int) -> list[str]:
    header = ["load", "strategy", "all freed, s", "held idle, accelerator-h", "cut", "failed"]
    rows = []
    for load in section["settings"]["loads"]:
        for i, strategy in enumerate(section["settings"]["strategies"]):
            c = _one(section["scale_downs"], size=size, load=load["name"], strategy=strategy["name"])
            rows.append([load["name"] if i == 0 else "", strategy["name"], Spread.of(c["wall_s"]).text(1),
                         Spread.of(c["held_idle_h"]).text(2), _n(c["cut"]), _n(c["failed"])])
    to = _select(section["scale_downs"], size=size)[0]["to"]
    return [f"Scale-down of the {size} to {to} (the {size - to} deleted at once):", "",
            *table(header, rows, "llrrrr"), ""]


def _real_engine_lines(section: dict) -> list[str]:
    """The first size's rollouts again on the real-engine tier's real vLLM timings, its pools beside the emulator's."""
    real = section.get("real_engine")
    if not real:
        return []
    ours = section["measured"]
    pools = [[pool_label(name), Spread.of(real["measured"][name]).text(2), str(len(real["measured"][name])),
              Spread.of(ours[name]).text(2)] for name in POOLS]
    return [f"### {real['size']} replicas on real vLLM's timings", "",
            "The same rollouts with each timing pool drawn from the real-engine tier's real vLLM 0.32 deletions "
            "(results.json's real-engine matrix: `make bench-engines`, 2 CPU cores, G = 30) where the tier has "
            "a deletion that shows it, the emulator's elsewhere: "
            + "; ".join(real["measured"]["sources"]) + ". Pools, s:", "",
            *table(["timing", "real vLLM", "real deletions", "emulator, alone"], pools, "lrrr"), "",
            *_rollout_table({**section, "rollouts": real["rollouts"]}, real["size"])]


def _calibration_lines(section: dict) -> list[str]:
    header = ["strategy", "load", "real", "engine exit, s: real", "model", "held idle, s: real", "model",
              "cut + failed: real", "model", "inside"]
    rows, outside = [], 0
    for row in section["calibration"]:
        misses = [k for k in ("exit_s", "held_idle_s", "lost") if not row[f"{k}_inside"]]
        outside += bool(misses)
        rows.append([row["strategy"], row["scenario"], str(row["real_n"]), Spread.of(row["real_exit_s"]).text(1),
                     Spread.of(row["model_exit_s"]).text(1), Spread.of(row["real_held_idle_s"]).text(1),
                     Spread.of(row["model_held_idle_s"]).text(1), _n(row["real_lost"]), _n(row["model_lost"]),
                     "yes" if not misses else "**no: " + ", ".join(misses) + "**"])
    ours = section["deletions"]
    errors = sum(1 for c in ours if c.get("error"))
    return ["**The deletion model against real deletions.** Every strategy's own setting deleted for real under "
            "three of the bench's loads (idle; mixed ≤20 s; three requests of G–2G s among short ones): from "
            "results.json's drain matrix and shutdown-timeout family where they hold the setting, and "
            f"{len(ours)} deletions run by this part with the same harness where they do not"
            f"{f' ({errors} failed to run)' if errors else ''}; the model under the same load over "
            f"{len(section['calibration'][0]['model_exit_s']) if section['calibration'] else 0} seeds. *Inside*: "
            "each real median within the model's range (seconds give or take the bench's 0.25 s grain). "
            f"{outside} of {len(rows)} rows fall outside.", "",
            *table(header, rows, "llrrrrrrrl"), ""]


def _real_roll_lines(section: dict) -> list[str]:
    header = ["strategy", "rollout, s: real", "simulated", "inside", "held idle, s: real", "simulated", "inside",
              "cut + failed: real", "simulated", "inside", "held idle, s: arrivals drawn afresh",
              "replacement start-up, s"]
    rows = []
    for entry in section["real_roll"]:
        real, sim = entry["real"], entry["simulated"]
        fresh = sim.get("fresh_arrivals")
        rows.append([real["strategy"], f"{real['wall_s']:.1f}", Spread.of(sim["wall_s"]).text(1),
                     "yes" if sim["wall_within"] else "**no**", f"{real['held_idle_s']:.1f}",
                     Spread.of(sim["held_idle_s"]).text(1), "yes" if sim["held_idle_within"] else "**no**",
                     str(real["cut"] + real["failed"]), _n(sim["lost"]) if "lost" in sim else DASH,
                     ("yes" if sim["lost_within"] else "**no**") if "lost" in sim else DASH,
                     Spread.of(fresh["held_idle_s"]).text(1) if fresh else DASH,
                     Spread.of(real["startups_s"]).text(2)])
    exits = [f"{e['real']['strategy']} " + Spread.of([d["engine_exited_at_s"] for d in e["real"]["deletions"]]).text(2)
             for e in section["real_roll"]]
    loop_s = [e["real"]["wall_s"] - sum(d["engine_exited_at_s"] for d in e["real"]["deletions"])
              - sum(e["real"]["startups_s"]) for e in section["real_roll"]]
    replicas = section["real_roll"][0]["real"]["replicas"] if section["real_roll"] else 0
    seeds = section["real_roll"][0]["simulated"]["seeds"] if section["real_roll"] else 0
    return [f"**Is the simulation honest?** {replicas} emulated vLLM replicas (real processes), each under the "
            "drain matrix's steady short load from its own router, rolled for real one at a time (maxSurge 0, "
            "maxUnavailable 1) by kubelet's emulation and a replacement loop (bench/fleet/real_roll.py); the "
            f"simulation of the same roll over {seeds} seeds: each deletion's own requests as its router recorded "
            "them, its router's lag and the replacements' measured start-ups, the timings drawn from the fleet's "
            "pools:", "",
            *table(header, rows, "lrrlrrlrrlrr"), "",
            f"The real deletions' engine exits, s after each delete: {'; '.join(exits)}. The simulated range holds "
            "only the spread of the pools (their deletions run alone just before the roll) and of this roll's "
            "start-ups; *inside*: the real figure within it, give or take the bench's "
            f"{MIN_SECONDS_DIFFERENCE:g} s grain. *Arrivals drawn afresh*: the same simulation with each deletion's requests drawn from the "
            "load instead of replayed: six deletions are one sample of when the last requests end, so this spread "
            "is context, not the check. The loop's own time (wall time minus the exits and start-ups): "
            f"{', '.join(f'{x:.2f} s' for x in loop_s)}.", ""]


def render(section: dict) -> list[str]:
    settings = section["settings"]
    measured = section["measured"]
    med = {k: statistics.median(measured[k]) for k in POOLS}
    matrix = section.get("matrix_pools")
    beside = ""
    if matrix:
        beside = (" The same pools in the drain matrix (eight deletions at a time), medians: "
                  + ", ".join(f"{pool_label(k)} {statistics.median(matrix[k]):.3f} s "
                              f"(alone {med[k]:.3f} s)" for k in POOLS if matrix.get(k)) + ".")
    strategies = [[s["name"], f"{s['grace_s']:g}", s["hook"] + (f" {s['sleep_s']:g} s" if s["sleep_s"] else ""),
                   DASH if s["shutdown_timeout_s"] is None else f"{s['shutdown_timeout_s']:g} s", s["provenance"]]
                  for s in settings["strategies"]]
    loads = [[load["name"], load["durations"], load["describe"]] for load in settings["loads"]]
    lines = [
        "## What a fleet saves (simulated from the measured deletions)", "",
        "A rollout replaces every replica of a role; a scale-down deletes many at once. `bench/fleet/` simulates "
        "both (a discrete-event simulation of Kubernetes' Deployment rules: bench/fleet/rollout.py) with each "
        "deletion modelled from the drain matrix's rules (bench/fleet/deletion.py) and its timings drawn from "
        "deletions measured one at a time, as each Pod's deletion has its node to itself (bench/fleet/solo.py, "
        "measured.py): vLLM's exit after its abort (median "
        f"{med['abort_exit_lag_s']:.2f} s after SIGTERM, or after the last client waiting on an aborted request "
        "hangs up: vLLM answers those nothing and stays while they wait, so under a router that waits, to "
        "kubelet's SIGKILL), "
        f"its `--shutdown-timeout` teardown ({med['teardown_idle_s']:.2f} s after a SIGTERM that found nothing "
        f"running, {med['teardown_after_drain_s']:.2f} s after the drain's end when it found work), "
        f"prestop's return after its route wait when nothing ran by then ({med['prestop_quiet_return_s']:.2f} s) "
        f"or after the last request when that ended later ({med['prestop_last_return_s']:.2f} s), and the "
        f"router's lag ({measured['route_lag_range_s'][0]:g}–{measured['route_lag_range_s'][1]:g} s). "
        f"Pools: {'; '.join(measured['sources'])}.{beside} Each figure is the median (min–max) over "
        f"{settings['seeds']} seeds, paired across strategies (the same requests and start-ups); "
        f"{settings['accelerators_per_replica']} accelerator per replica (multiply by yours). "
        f"Written by `python -m bench.run --parts fleet{' --quick' if settings['quick'] else ''}`.", "",
        "Strategies, and where each one's own setting was deleted for real (the model is set against those "
        "deletions below):", "",
        *table(["strategy", "G, s", "preStop", "--shutdown-timeout", "real deletions"], strategies, "lrlll"), "",
        "Loads (stated assumptions of real serving, not measurements: a chat answer of a few hundred tokens, a "
        "long generation of a few thousand, at 30–100 tokens/s):", "",
        *table(["load", "durations, s", "arrivals"], loads, "lll"), "",
        "Rollouts: one replica at a time per role. With maxSurge 0 the replacement waits for the departing "
        "replica's accelerator (its drain adds to the rollout); with maxSurge 1 Kubernetes creates the next "
        "replacement as soon as an old replica is deleted, but it starts only on a free accelerator: with one "
        "spare (just the surge) it still waits the drain out, with two the drain overlaps the next start-up. "
        "The rollout columns: " + "; ".join(f"*{r['short']}*: {r['name']}, {r['startup']}" for r in settings["rollouts"])
        + ". Held idle and cut/failed are the same in every column (the same deletions).", "",
    ]
    for size in settings["sizes"]:
        lines += [f"### {size} replicas", "", *_rollout_table(section, size), *_scale_down_table(section, size)]
    lines += _real_engine_lines(section)
    lines += [f"![held accelerator-hours against the share of long generations]({PLOT_LINK})", "",
              f"Held accelerator-hours of one rollout of {settings['mix_size']} replicas (maxSurge 0, the "
              "4–6 min model load) against the share of long generations among short chat, ~8 requests in flight "
              "per replica; a hollow marker where the strategy cuts or fails requests at that mix.", ""]
    lines += _calibration_lines(section) if "calibration" in section else []
    lines += _real_roll_lines(section)
    return lines


def plot(section: dict, path: Path = PLOT) -> Path:
    import matplotlib  # a bench-only dependency

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 5.5), dpi=110)
    for strategy in section["settings"]["strategies"]:
        rows = sorted(_select(section["mix"], strategy=strategy["name"]), key=lambda r: r["long_share"])
        xs = [r["long_share"] for r in rows]
        spreads = [Spread.of(r["held_idle_h"]) for r in rows]
        ys = [s.median for s in spreads]
        errors = [[s.median - s.low for s in spreads], [s.high - s.median for s in spreads]]
        line = ax.errorbar(xs, ys, yerr=errors, label=strategy["name"], capsize=2, linewidth=1.2)
        color = line.lines[0].get_color()
        for r, y in zip(rows, ys):
            clean = max(r["cut"]) == 0 and max(r["failed"]) == 0
            ax.plot([r["long_share"]], [y], "o", color=color, markerfacecolor=color if clean else "white")
    ax.set_xlabel("share of long generations (20–120 s) among short chat (1–12 s)")
    ax.set_ylabel("accelerator-hours held idle per rollout")
    ax.set_title(f"One rollout of {section['settings']['mix_size']} replicas (hollow: cuts or fails requests)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    source = Path(argv[0]) if argv else HERE.parent / "results.json"
    results = json.loads(source.read_text())
    if "fleet" not in results:
        print(f"{source}: no fleet part; run `python -m bench.run --parts fleet`", file=sys.stderr)
        return 2
    print(plot(results["fleet"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
