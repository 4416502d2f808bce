"""A scrape's cost (bench/costs/scrape.py): the registry it times renders what a real vLLM serves."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from bench.costs import scrape as cost_scrape
from bench.costs.scrape import fetch_body, registry_from, series
from modeldrain.hook.constants import BUSY_READ_ENGINE_SHARE


@pytest.mark.parametrize("engine_args", [(), ("--dp", "2")])
def test_the_rebuilt_registry_renders_the_engines_own_series(engine_args):
    body = fetch_body(engine_args)
    rendered = generate_latest(registry_from(body)).decode()
    assert series(rendered) == series(body)
    # vLLM's _created series come from the counters and histograms themselves, not copied gauges.
    assert "# TYPE vllm:prompt_tokens_created gauge" in rendered
    assert abs(len(rendered) - len(body)) < 0.01 * len(body)  # only the process_* values differ


def test_the_series_check_sees_a_series_the_render_lacks():
    body = fetch_body(())
    lacking = "\n".join(line for line in body.splitlines() if not line.startswith("vllm:num_requests_running"))
    assert series(lacking) != series(body)


def test_a_render_costs_cpu_and_a_larger_body_costs_more():
    result = cost_scrape.measure_all(rounds=2, bodies=[("small", ()), ("large", ("--dp", "8"))])
    small, large = result["bodies"]
    assert 0 < min(small["cpu_s"]) and min(large["cpu_s"]) > max(small["cpu_s"])
    assert small["busy_cores"] == pytest.approx(small["busy_reads_per_s"] * small["idle_cores"])
    # A longer render spaces the busy reads further apart: never over BUSY_READ_ENGINE_SHARE of the engine.
    assert large["busy_reads_per_s"] <= small["busy_reads_per_s"] <= 4
    assert large["busy_cores"] <= max(BUSY_READ_ENGINE_SHARE, large["idle_cores"]) * 1.05
