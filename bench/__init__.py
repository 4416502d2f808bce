"""bench/: what modeldrain buys and what it costs, measured (`make bench` writes bench/RESULTS.md).

- drain_quality.py: real deletions (engine emulator, kubelet emulation, a router) under each
  preStop strategy, run side by side on the same scenarios and seeds.
- cost_prestop.py: the hook's start-up, memory and size, bundle against console script.
- cost_reading.py: turning an exposition into the gauge sums, against prometheus-client's full parse.
- sidecar_bench.py: drain-sidecar latency, throughput, engine reads and memory.
- run.py: runs them all; report.py: their results as RESULTS.md; spread.py: medians, ranges, ties.
"""
