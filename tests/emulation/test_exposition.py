"""The emulated /metrics has the real engines' families: names, types, label sets, buckets."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from emulation.engine_config import parse_engine_args
from emulation.engine_process import EngineProcess
from emulation.exposition import Renderer
from emulation.live_metrics import EngineSnapshot, live_families
from emulation.misbehaviour import MisbehaviourSetting
from emulation.scheduler import Phase, RankSnapshot
from emulation.template import TEMPLATES_DIR, engine_template, parse_exposition

FIXTURE_OF = {
    ("vllm", "unified"): "vllm-0.32.0-cpu-metrics-idle.txt",
    ("sglang", "unified"): "sglang-0.5.23-cpu-metrics-idle.txt",
    ("sglang", "prefill"): "sglang-0.5.23-cpu-metrics-prefill-idle.txt",
    ("sglang", "decode"): "sglang-0.5.23-cpu-metrics-decode-idle.txt",
}


def shape(text: str) -> dict[str, tuple[str, frozenset]]:
    """family -> (type, the set of label-name sets of its samples)."""
    return {f.name: (f.type, frozenset(frozenset(s.labels) for s in f.samples)) for f in parse_text(text)}


def render(*argv: str, running: int = 0, waiting: int = 0, published: bool = True, accept: str = "",
           setting: MisbehaviourSetting = MisbehaviourSetting()) -> str:
    config = parse_engine_args(list(argv))
    template = engine_template(config, time.time(), 4242)
    phases = {p: 0 for p in Phase}
    phases.update({Phase.RUNNING: running, Phase.WAITING: waiting})
    snapshot = EngineSnapshot(tuple(RankSnapshot(phases, 0, 0, 0, ()) for _ in range(config.dp)), published)
    body = Renderer(config, template.families).render(live_families(config, template, snapshot, setting), accept, "")
    return body.data.decode()


def test_scrapes_are_the_measured_ones(fixtures_dir: Path):
    lines = (fixtures_dir / "SHA256SUMS").read_text().splitlines()
    sums = {name: digest for digest, name in (line.split() for line in lines)}
    assert set(sums) == {p.name for p in fixtures_dir.glob("*.txt")}
    assert set(FIXTURE_OF.values()) <= set(sums)
    for name, digest in sums.items():
        assert hashlib.sha256((fixtures_dir / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("kind, role", FIXTURE_OF)
def test_families_match_the_real_scrape(fixtures_dir, kind, role):
    emulated = shape(render("--kind", kind, "--role", role, published=False))
    real = shape((fixtures_dir / FIXTURE_OF[(kind, role)]).read_text())
    assert emulated == real


def test_vllm_text_is_the_scrape_with_fresh_values(fixtures_dir):
    """Line for line the real scrape, but for values (a fresh process) and HELP's trailing blanks."""
    real = (fixtures_dir / FIXTURE_OF[("vllm", "unified")]).read_text().splitlines()
    emulated = render("--kind", "vllm").splitlines()
    assert len(emulated) == len(real)
    for ours, theirs in zip(emulated, real):
        if theirs.startswith("#"):
            assert ours == theirs.rstrip()
        else:
            assert ours.rsplit(" ", 1)[0] == theirs.rsplit(" ", 1)[0]


def test_work_gauges_carry_live_values():
    families = {f.name: f for f in parse_text(render("--kind", "vllm", "--dp", "2", running=3, waiting=5))}
    running = {s.labels["engine"]: s.value for s in families["vllm:num_requests_running"].samples}
    waiting = {s.labels["engine"]: s.value for s in families["vllm:num_requests_waiting"].samples}
    assert running == {"0": 3.0, "1": 3.0} and waiting == {"0": 5.0, "1": 5.0}
    by_reason = {(s.labels["engine"], s.labels["reason"]): s.value
                 for s in families["vllm:num_requests_waiting_by_reason"].samples}
    assert by_reason[("1", "capacity")] == 5.0 and by_reason[("1", "deferred")] == 0.0


def test_vllm_single_process_has_start_time_multiprocess_not():
    single = {f.name for f in parse_text(render("--kind", "vllm"))}
    multi = {f.name for f in parse_text(render("--kind", "vllm", "--multiprocess"))}
    assert "process_start_time_seconds" in single
    assert not any(n.startswith(("process_", "python_")) for n in multi)
    assert "vllm:num_requests_running" in multi


def test_vllm_multiprocess_never_served_declares_its_per_step_gauges_with_no_series():
    # vLLM 0.32 with --api-server-count 2 before its first request (docs/engines.md): the work
    # gauges' HELP and TYPE lines and no sample; the counters at 0, cache_config_info set at start.
    fresh = {f.name: f for f in parse_text(render("--kind", "vllm", "--multiprocess", published=False))}
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
        assert fresh[name].type == "gauge" and fresh[name].samples == []
    assert fresh["vllm:request_success"].samples and fresh["vllm:cache_config_info"].samples
    served = {f.name: f for f in parse_text(render("--kind", "vllm", "--multiprocess", published=True))}
    assert [s.value for s in served["vllm:num_requests_running"].samples] == [0.0]
    single = {f.name: f for f in parse_text(render("--kind", "vllm", published=False))}
    assert [s.value for s in single["vllm:num_requests_running"].samples] == [0.0]


def test_sglang_never_has_start_time():
    assert "process_start_time_seconds" not in render("--kind", "sglang")


def test_sglang_dp_adds_dp_rank():
    families = {f.name: f for f in parse_text(render("--kind", "sglang", "--dp", "2", running=1))}
    ranks = sorted(s.labels["dp_rank"] for s in families["sglang:num_running_reqs"].samples)
    assert ranks == ["0", "1"]


def test_decode_publishes_scheduler_gauges_only_after_a_first_run():
    before = {f.name for f in parse_text(render("--kind", "sglang", "--role", "decode", published=False))}
    after = {f.name: f for f in parse_text(render("--kind", "sglang", "--role", "decode", published=True))}
    wanted = {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_decode_prealloc_queue_reqs",
              "sglang:num_decode_transfer_queue_reqs"}
    assert not wanted & before
    assert wanted <= set(after)
    assert {s.labels["engine_type"] for s in after["sglang:num_running_reqs"].samples} == {"decode"}


def test_legacy_prefill_name():
    names = {f.name for f in parse_text(render("--kind", "sglang", "--role", "prefill", "--legacy-prefill-name"))}
    assert "sglang:num_prefill_prealloc_queue_reqs" in names
    assert "sglang:num_prefill_bootstrap_queue_reqs" not in names


def test_forced_openmetrics_parses_with_names_intact():
    text = render("--kind", "vllm", "--format", "openmetrics", running=2)
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in parse_openmetrics(text)}
    assert families["vllm:num_requests_running"].samples[0].value == 2.0
    assert families["vllm:request_success"].type == "counter"


def test_negotiated_openmetrics_is_what_prometheus_client_writes():
    """A reader that lists OpenMetrics in Accept (at any q) gets it, as from a real engine; and
    prometheus_client 0.26 then writes `vllm_` sample names under `vllm:` HELP lines."""
    text = render("--kind", "vllm", accept="text/plain;version=0.0.4;q=1, application/openmetrics-text;q=0.5")
    assert text.endswith("# EOF\n")
    assert "\nvllm_num_requests_running{" in text
    assert "\nvllm:num_requests_running{" not in text


@pytest.mark.parametrize("kind, body_kb", [("vllm", 50), ("vllm", 500), ("sglang", 500), ("vllm", 800)])
def test_body_is_padded_to_size(kind, body_kb):
    text = render("--kind", kind, "--body-kb", str(body_kb))
    assert abs(len(text) - body_kb * 1024) < 4096
    assert {f.name for f in parse_text(text)} >= {f"{kind}:num_requests_running" if kind == "vllm"
                                                   else "sglang:num_running_reqs"}


def test_default_sizes_are_the_engines():
    assert 45_000 < len(render("--kind", "vllm")) < 50_000
    assert 65_000 < len(render("--kind", "sglang")) < 75_000


def test_parse_exposition_folds_created_gauges():
    families = {f.name: f for f in parse_exposition((TEMPLATES_DIR / FIXTURE_OF[("vllm", "unified")]).read_text())}
    assert "vllm:request_success_created" not in families
    assert {s.name for s in families["vllm:request_success"].samples} == {
        "vllm:request_success_total", "vllm:request_success_created"}


def test_served_over_http_with_name_filter_and_gzip():
    with EngineProcess("--kind", "vllm", "--body-kb", "500") as engine:
        status, body, headers = engine.request("GET", "/metrics")
        assert status == 200 and len(body) > 500_000
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        status, body, _ = engine.request(
            "GET", "/metrics?name[]=vllm:num_requests_running&name[]=vllm:num_requests_waiting")
        assert [f.name for f in parse_text(body.decode())] == ["vllm:num_requests_running",
                                                               "vllm:num_requests_waiting"]
        status, body, headers = engine.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
        assert headers.get("Content-Encoding") == "gzip" and len(body) < 100_000
