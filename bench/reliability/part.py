"""The `reliability` part of `make bench`: issue 12's figures, each with the command that reproduces it.

    python -m bench.run --parts reliability [--quick]

- hostile inputs against the real `prestop` (bench/reliability/hostile.py): crashes, false idles,
  overruns (the worst lateness past the deadline), the longest log line;
- the sidecar's answers to the same bodies, a FIFO token file, SIGTERM mid-parse
  (bench/reliability/sidecar.py);
- the differential fuzz tests with a stated number of examples (bench/reliability/fuzz.py);
- the sidecar's availability to the controller and kubelet's probes under floods and slowloris, and
  its RSS over a soak (bench/reliability/availability.py);
- abuse of GET /v1/drain (issue 15): strangers who pre-answer, shorten or flood kubelet's drain call
  (bench/reliability/drain_route.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.reliability import availability as reliability_availability
from bench.reliability import drain_route as reliability_drain_route
from bench.reliability import fuzz as reliability_fuzz
from bench.reliability import hostile as reliability_hostile
from bench.reliability import sidecar as reliability_sidecar


@dataclass(frozen=True)
class Settings:
    executables: int  # how many of the present executables (bundle first) run the catalogue
    jobs: int  # scripted hostile cases at once
    fuzz_examples: int  # per property
    scenario_s: float  # timed seconds per availability scenario
    soak_s: float
    sample_every_s: float  # RSS samples during the soak


# The full run: ~5 min on 2 cores. --quick: ~1.5 min, one executable, short soak.
FULL = Settings(executables=2, jobs=2, fuzz_examples=1000, scenario_s=10.0, soak_s=120.0, sample_every_s=3.0)
QUICK = Settings(executables=1, jobs=3, fuzz_examples=100, scenario_s=3.0, soak_s=15.0, sample_every_s=1.0)

SHOWN_AS = {"bundle": "dist/prestop", "console": ".venv/bin/prestop"}


def measure(executables: dict[str, Path], quick: bool, progress: Callable[[str], None] = lambda message: None) -> dict:
    """`executables`: name ("bundle", "console") -> the file to run, bundle first."""
    settings = QUICK if quick else FULL
    chosen = dict(list(executables.items())[: settings.executables])
    names = ",".join(chosen)

    progress(f"reliability: hostile inputs, {', '.join(SHOWN_AS[n] for n in chosen)}")
    runs = reliability_hostile.measure(chosen, settings.jobs, progress)
    hostile = {"command": f"python -m bench.reliability.hostile --executables {names} --jobs {settings.jobs}",
               "executables": {n: SHOWN_AS[n] for n in chosen},
               "summary": reliability_hostile.summary(runs), "runs": [r.as_dict() for r in runs]}

    progress("reliability: the sidecar's answers to hostile input")
    sidecar = dict(reliability_sidecar.measure(), command="python -m bench.reliability.sidecar")

    progress(f"reliability: differential fuzzing, {settings.fuzz_examples} examples per property")
    fuzz = reliability_fuzz.measure(settings.fuzz_examples)

    progress(f"reliability: sidecar availability ({settings.scenario_s:g} s a scenario), soak {settings.soak_s:g} s")
    availability = reliability_availability.measure(settings.scenario_s, settings.soak_s, settings.sample_every_s)
    availability["command"] = (f"python -m bench.reliability.availability --seconds {settings.scenario_s:g} "
                               f"--soak {settings.soak_s:g} --sample-every {settings.sample_every_s:g}")

    progress("reliability: drain-route abuse (pre-answering, shortening, flooding kubelet's call)")
    drain_route = dict(reliability_drain_route.measure(), command="python -m bench.reliability.drain_route")
    return {"quick": quick, "hostile": hostile, "sidecar": sidecar, "fuzz": fuzz, "availability": availability,
            "drain_route": drain_route}
