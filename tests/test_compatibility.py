"""docs/compatibility.md, made by engines/compat.py from the released wheels, holds gauges.py to every
release: each work gauge a listed release defines is read, or named as not work with the reason, or
the release is named unsupported with what it lacks."""

from __future__ import annotations

from pathlib import Path

from engines.compat import DOC, REQUEST_GAUGE, Release, hook_does, load, table, vllm_release
from modeldrain.hook.gauges import ALL_WORK_METRIC_NAMES, NOT_WORK_GAUGES, RELEASE_RULES

REPO = Path(__file__).resolve().parent.parent


def test_every_work_gauge_of_every_release_is_read_or_the_release_is_unsupported():
    releases = load()
    assert {r.engine for r in releases} == {"vllm", "sglang"}
    for release in releases:
        verdict, unread = hook_does(release)
        for gauge in release.gauges:
            assert REQUEST_GAUGE.match(gauge)
            assert gauge in ALL_WORK_METRIC_NAMES or gauge in NOT_WORK_GAUGES or gauge in unread
        assert bool(unread) == verdict.startswith("unsupported"), (release.version, verdict)
        assert not unread, f"{release.engine} {release.version}: {verdict}"  # none is unsupported today


def test_a_gauge_left_unread_makes_its_release_unsupported():
    release = Release("vllm", "9.9.9", {"vllm:num_requests_new_queue": "model_name, engine"})
    verdict, unread = hook_does(release)
    assert unread == ["vllm:num_requests_new_queue"] and verdict.startswith("unsupported")


def test_the_not_work_list_names_only_gauges_some_release_defines():
    defined = {g for r in load() for g in r.gauges}
    assert set(NOT_WORK_GAUGES) <= defined
    assert not set(NOT_WORK_GAUGES) & ALL_WORK_METRIC_NAMES


def test_every_release_rule_applied_exists():
    assert {f for r in load() for f in r.facts} <= set(RELEASE_RULES)


def test_the_table_is_the_data_as_gauges_py_reads_it_now():
    # After a change to gauges.py: python -m engines.compat --table-only
    assert DOC.read_text() == table(load()), "rerun: python -m engines.compat --table-only"


def test_the_range_covers_vllm_08_and_sglang_04_to_the_newest_read():
    releases = load()
    vllm = [r.version for r in releases if r.engine == "vllm"]
    sglang = [r.version for r in releases if r.engine == "sglang"]
    assert vllm[0].startswith("0.8.") and sglang[0].startswith("0.4.")
    assert len({v.rsplit(".", 1)[0] for v in vllm}) == len(vllm)  # one per minor release


def test_the_readme_names_the_range():
    releases = load()
    first = {e: next(r.version for r in releases if r.engine == e) for e in ("vllm", "sglang")}
    last = {e: [r.version for r in releases if r.engine == e][-1] for e in ("vllm", "sglang")}
    row = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| engines |"))
    assert f"vLLM {first['vllm']} to {last['vllm']}" in row and f"SGLang {first['sglang']} to {last['sglang']}" in row
    assert "docs/compatibility.md" in row


def test_the_wheel_reader_finds_gauges_and_their_labels(tmp_path):
    # What engines/compat.py reads in a release's sources, on a tree written here (no download).
    loggers = tmp_path / "vllm" / "v1" / "metrics" / "loggers.py"
    loggers.parent.mkdir(parents=True)
    loggers.write_text(
        "import prometheus_client\n"
        "class PrometheusStatLogger:\n"
        "    def __init__(self, vllm_config, engine_index=0):\n"
        "        labelnames = ['model_name', 'engine']\n"
        "        self.g = self._gauge_cls(name='vllm:num_requests_running', documentation='x',\n"
        "                                 labelnames=labelnames)\n"
        "        self.w = prometheus_client.Gauge(name='vllm:num_requests_waiting_by_reason', documentation='x',\n"
        "                                         labelnames=labelnames + ['reason'])\n"
        "        self.c = prometheus_client.Counter(name='vllm:num_requests_total', documentation='x')\n"
        "        self.k = prometheus_client.Gauge(name='vllm:kv_cache_usage_perc', documentation='x')\n")
    (tmp_path / "vllm" / "entrypoints").mkdir(parents=True)
    (tmp_path / "vllm" / "entrypoints" / "cli_args.py").write_text("parser.add_argument('--api-server-count')\n")
    release = vllm_release("0.9.9", tmp_path)
    assert release.gauges == {"vllm:num_requests_running": "model_name, engine",
                              "vllm:num_requests_waiting_by_reason": "model_name, engine, reason"}
    assert "vllm_dp_last_engine_only" in release.facts  # no engine_indexes: one logger per engine core
    assert "--api-server-count" in release.multiprocess and "no `--shutdown-timeout`" in release.sigterm
