"""The emulated SGLang's `sglang:http_requests_active`: each route's handlers, from arrival, the
scrape's own `/metrics` series included, as the real SGLang 0.5.23 exports it (docs/engines.md)."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families as parse_text

from emulation.engine_config import parse_engine_args
from emulation.engine_process import EngineProcess
from emulation.exposition import Renderer
from emulation.live_metrics import EngineSnapshot, live_families
from emulation.load import LoadGenerator, UniformDurations
from emulation.misbehaviour import MisbehaviourSetting
from emulation.scheduler import Phase, RankSnapshot
from emulation.template import engine_template
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.gauges import EngineKind, Role
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.reader import classify_body

GAUGE = "sglang:http_requests_active"
REQUESTS = 3
# Long enough that the scrape lands while every request is in its handler, on a loaded machine.
LONG = UniformDurations(8.0, 8.0)
COUNTED_WITHIN_S = 5.0


def http_active(text: str) -> dict[tuple[str, str], float]:
    family = next(f for f in parse_text(text) if f.name == GAUGE)
    return {(s.labels["endpoint"], s.labels["method"]): s.value for s in family.samples}


def hook_read(text: str) -> Read:
    hint = EngineHint(kind=EngineKind.SGLANG, role=Role.UNIFIED, source="flag")
    base = Read(ReadOutcome.INCOMPLETE, 0.0, 0.0, kind=EngineKind.SGLANG, role=Role.UNIFIED)
    return classify_body(base, text.encode(), "text/plain", hint, deadline_at=time.monotonic() + 30)


def test_the_rendered_series_follow_the_counts_and_gain_the_routes_requests_came_to():
    config = parse_engine_args(["--kind", "sglang"])
    template = engine_template(config, time.time(), 4242)
    idle = RankSnapshot({p: 0 for p in Phase}, 0, 0, 0, ())
    snapshot = EngineSnapshot((idle,), True, {("/metrics", "GET"): 1, ("/v1/completions", "POST"): 2})
    families = live_families(config, template, snapshot, MisbehaviourSetting())
    series = http_active(Renderer(config, template.families).render(families, "", "").data.decode())
    # The real scrape's routes stay (at 0 where nothing is in them); the new route is added.
    assert series == {("/health", "GET"): 0, ("/model_info", "GET"): 0, ("/generate", "POST"): 0,
                      ("/freeze_gc", "POST"): 0, ("/metrics", "GET"): 1, ("/v1/completions", "POST"): 2}


def test_an_emulated_sglang_counts_its_requests_from_arrival_and_its_own_scrape():
    with EngineProcess("--kind", "sglang", "--max-running", "8") as engine:
        before = engine.metrics_text()
        assert http_active(before)[("/metrics", "GET")] == 1  # the scrape itself, as on the real one
        assert hook_read(before).outcome is ReadOutcome.IDLE
        load = LoadGenerator(engine.base_url, concurrency=REQUESTS, durations=LONG, seed=1,
                             max_requests=REQUESTS).start()
        deadline_at = time.monotonic() + COUNTED_WITHIN_S
        while http_active(text := engine.metrics_text()).get(("/v1/completions", "POST")) != REQUESTS:
            assert time.monotonic() < deadline_at, http_active(text)
            time.sleep(0.1)
        assert load.tally().in_flight == REQUESTS, "the requests ended before the read: nothing measured"
        read = hook_read(text)
        assert read.outcome is ReadOutcome.BUSY and read.gauges[GAUGE] == REQUESTS and read.in_flight == REQUESTS
        tally = load.wait(timeout_s=60)
        assert tally.completed == REQUESTS, tally.summary()
        after = engine.metrics_text()
        assert http_active(after)[("/v1/completions", "POST")] == 0 and hook_read(after).outcome is ReadOutcome.IDLE
        # Its test controls are not SGLang's routes: never a series.
        engine.stats()
        assert not {e for e, _ in http_active(engine.metrics_text()) if e.startswith("/control/")}


def test_an_emulated_vllm_has_no_such_gauge(vllm):
    assert GAUGE not in vllm.metrics_text()
