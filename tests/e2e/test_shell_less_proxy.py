"""A routing proxy with no shell, in front of a direct decoder, stopped as a classic container is:
at the delete, while the engine behind it drains. Its own preStop is the static prestop (copied
into an emptyDir by `prestop install`), reading the engine over the Pod's loopback: the proxy
stops only once the engine is idle, and nothing in flight through it is reset."""

from __future__ import annotations

import threading
import time

import pytest

from emulation.engine_process import EngineProcess
from emulation.kubelet import DeletionReport, delete_pod
from emulation.load import LoadGenerator, UniformDurations
from emulation.proxy import ProxyProcess

from .prestop_run import NO_PROCESSES, PRESTOP

GRACE_S = 30


def prestop_for(port: int) -> list[str]:
    return [PRESTOP, "--grace", str(GRACE_S), "--port", str(port), "--engine", "vllm", "--proc-root", NO_PROCESSES,
            "--quiet"]


def delete_both(engine: EngineProcess, proxy: ProxyProcess, proxy_hook: list[str] | None,
                load: LoadGenerator) -> tuple[DeletionReport, DeletionReport]:
    """kubelet stops a Pod's containers at once, each through its own preStop, SIGTERM and SIGKILL."""
    reports: dict[str, DeletionReport] = {}
    assert engine.port is not None and proxy.process is not None

    def engine_side() -> None:
        assert engine.port is not None
        reports["engine"] = delete_pod(engine, prestop_for(engine.port), GRACE_S)

    engine_thread = threading.Thread(target=engine_side)
    engine_thread.start()
    reports["proxy"] = delete_pod(proxy.process, proxy_hook, GRACE_S, load=load, route_drop_after_s=1.0)
    engine_thread.join(GRACE_S + 15)
    return reports["engine"], reports["proxy"]


@pytest.mark.parametrize("proxy_has_a_hook", [True, False])
def test_the_proxy_stops_after_the_engine_is_idle_only_with_its_own_prestop(proxy_has_a_hook):
    with EngineProcess("--kind", "vllm", "--max-running", "8") as engine, ProxyProcess(engine.port) as proxy:
        load = LoadGenerator(proxy.base_url, rate_per_s=3.0, durations=UniformDurations(2.0, 4.0), seed=11).start()
        time.sleep(2.0)  # requests in flight through the proxy
        hook = prestop_for(engine.port) if proxy_has_a_hook else None
        engine_report, proxy_report = delete_both(engine, proxy, hook, load)
    if proxy_has_a_hook:
        assert proxy_report.hook_exit_code == 0 and proxy_report.cut == 0 and proxy_report.completed > 0
        last_done = proxy_report.relative(proxy_report.load.last_finished_at)
        assert proxy_report.sigterm_at >= last_done  # the proxy stopped after the last request ended
        assert engine_report.hook_exit_code == 0
    else:
        assert proxy_report.sigterm_at < 0.5 and proxy_report.cut > 0  # reset mid-request
