"""bench/: what modeldrain buys and what it costs, measured (`make bench` writes bench/RESULTS.md).

One folder per kind of figure: drains/ (real deletions under each preStop strategy and every drain
configuration), costs/ (each executable's start-up, memory and size, a read's and a scrape's cost),
fleet/ (rollouts and scale-downs simulated from measured deletions), reliability/ (hostile input,
fuzzing, attack), engines/ (the same on real vLLM and SGLang; needs `make engines`). bench/README.md
maps each module to the section of RESULTS.md or docs/engines.md it writes, and its command.
"""
