"""bench/: what modeldrain buys and what it costs, measured (`make bench` writes bench/RESULTS.md).

Module map (each module's docstring says more; RESULTS.md says what each part measured):
- run.py: runs the parts; report.py: their results as RESULTS.md; tables.py, spread.py: medians,
  ranges and ties; machine.py: what the machine was doing; pool.py: runs drains side by side.
- drains/: real deletions (engine emulator, kubelet emulation, a router) under each preStop
  strategy (quality.py, deletion.py), and every drain configuration (configurations.py and the
  modules it runs: split roles, leader and worker, --shutdown-timeout, the return lag).
- costs/: each executable's start-up, memory and size (prestop.py, sidecar.py, process.py), a
  read's and a scrape's cost (reading.py, scrape.py), drain-sidecar under load (sidecar_load.py).
- fleet/: a role's rollout and scale-down of 100 and 1,000 replicas per preStop strategy, simulated
  (rollout.py) from a deletion model (deletion.py) drawn from timings measured one deletion at a
  time (solo.py; measured.py: what each pool is, and the same pools from the drain matrix and from
  the real-engine tier's real vLLM), set against real deletions (calibration.py) and a real roll of
  six replayed through the model (real_roll.py).
- engines/: the real engines' request lifecycle (lifecycle.py; needs `make engines`): which signal
  shows each phase of a request and how late (docs/engines.md's tables).
  deletions.py: real vLLM replicas deleted under load, prestop against sleep 5 and no hook, and
  the lag from the last request to prestop's return (RESULTS.md, "Real vLLM deletions").
- reliability/: hostile inputs, differential fuzzing, availability under attack and a soak
  (part.py runs them; cases.py, bodies.py the inputs; report.py the tables).
"""
