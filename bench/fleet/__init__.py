"""fleet/: what a fleet's rollout and scale-down cost per preStop strategy, by simulation (issue 20)."""
