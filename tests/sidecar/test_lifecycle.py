"""SIGTERM: keep answering while the engine's listener is there, then exit 0, both ways a Pod stops."""

import signal
import threading
import time

from emulation.engine_process import EngineProcess, free_port
from modeldrain.hook.signals import IGNORED_SIGNALS

from .sidecar_process import SidecarProcess, kill_now


def events_named(sidecar, name):
    return [e for e in sidecar.events() if e["event"] == name]


def test_native_sidecar_gets_sigterm_after_its_engine_exited_and_leaves_at_once():
    with EngineProcess("--kind", "vllm") as engine, SidecarProcess("--port", str(engine.port)) as s:
        assert s.work()["read"]["idle"] is True
        kill_now(engine)  # kubelet stops a native sidecar only after the main containers are gone
        sent_at = time.monotonic()
        s.send_signal(signal.SIGTERM)
        assert s.wait(5) == 0
        assert time.monotonic() - sent_at < 1.5
    assert events_named(s, "engine_gone")
    assert events_named(s, "stopped")[0]["reason"] == "engine_gone"


def test_classic_container_gets_sigterm_with_its_engine_and_lingers_through_the_drain():
    engine_args = ("--kind", "vllm", "--shutdown-timeout", "10", "--drain-teardown-s", "0.5")
    with EngineProcess(*engine_args) as engine, SidecarProcess("--port", str(engine.port)) as s:
        request = threading.Thread(target=engine.request, args=("POST", "/v1/completions", {"duration_s": 2.0}),
                                   kwargs={"timeout_s": 10})
        request.start()
        while not s.work()["read"]["in_flight"]:
            time.sleep(0.05)
        assert s.work()["sidecar"]["draining"] is None
        engine.send_signal(signal.SIGTERM)  # the same moment, as kubelet does for classic containers
        s.send_signal(signal.SIGTERM)
        during = s.work()  # still answering, and still reading the draining engine
        assert during["sidecar"]["terminating"] is True
        assert during["sidecar"]["draining"]["via"] == "sigterm"  # the deletion reached it by its own SIGTERM
        assert during["read"]["outcome"] == "busy" and during["read"]["in_flight"] >= 1
        assert s.get_json("/readyz") == (200, {"status": "ready", "terminating": True})
        request.join()
        engine_code = engine.wait(10)
        engine_exited_at = time.monotonic()
        sidecar_code = s.wait(10)
        sidecar_exited_at = time.monotonic()
    assert engine_code == 0 and sidecar_code == 0
    # It left once the listener closed (0.5 s before the engine's exit), not at the linger bound.
    assert sidecar_exited_at - engine_exited_at < 1.5
    gone = events_named(s, "engine_gone")
    assert gone and gone[0]["after_s"] > 1.0


def test_linger_is_bounded_when_the_engine_never_leaves():
    with EngineProcess("--kind", "sglang", "--on-sigterm", "ignore") as engine, \
            SidecarProcess("--port", str(engine.port), "--linger-max", "1") as s:
        sent_at = time.monotonic()
        s.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        s.send_signal(signal.SIGTERM)  # a second SIGTERM changes nothing
        assert s.work()["sidecar"]["terminating"] is True
        assert s.wait(5) == 0
        elapsed_s = time.monotonic() - sent_at
        assert engine.alive()
        kill_now(engine)
    assert 0.9 < elapsed_s < 2.5
    assert events_named(s, "linger_bound")
    assert len(events_named(s, "sigterm")) == 1


def test_an_engine_still_loading_does_not_hold_the_sidecar():
    # Nothing listens yet (the engine is loading its model): SIGTERM ends the sidecar at once.
    with SidecarProcess("--port", str(free_port()), "--engine", "vllm") as s:
        assert s.work()["read"]["outcome"] == "refused"
        assert s.get_json("/readyz")[0] == 200  # loading is no reason to be unready
        s.send_signal(signal.SIGTERM)
        assert s.wait(5) == 0


def test_a_read_stuck_on_the_engine_does_not_hold_the_exit_past_the_linger_bound():
    # The engine accepts and never answers, and reads may take 30 s: a read is in flight when SIGTERM
    # comes. The sidecar leaves at its linger bound (1 s) plus the handlers' shutdown allowance, not
    # when the read would end.
    import socket

    engine = socket.create_server(("127.0.0.1", 0))
    try:
        with SidecarProcess("--port", str(engine.getsockname()[1]), "--engine", "vllm", "--read-timeout", "30",
                            "--linger-max", "1") as s:
            cut = []

            def wait_for_work():
                try:
                    s.request("GET", "/v1/work", timeout_s=40)
                except ConnectionError as exc:
                    cut.append(exc)  # the exit cuts the request that waits on the stuck read

            waiter = threading.Thread(target=wait_for_work, daemon=True)
            waiter.start()
            time.sleep(0.5)  # the read is in flight
            sent_at = time.monotonic()
            s.send_signal(signal.SIGTERM)
            assert s.wait(15) == 0
            assert time.monotonic() - sent_at < 5.0  # 1 s linger, 2 x 1 s for handlers, slack: not 30 s
            waiter.join(5)
            assert cut
    finally:
        engine.close()


def ignores_all(pid, signums):
    with open(f"/proc/{pid}/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    return all(mask & (1 << (signum - 1)) for signum in signums)


def test_stray_signals_are_ignored_and_sigquit_stops_it_at_once(vllm_engine):
    # A SIGHUP, a stray SIGUSR1, job control's SIGTSTP...: none ends (or freezes) the sidecar the
    # controller is reading; SIGQUIT, like SIGINT, is someone at a terminal stopping it now.
    with SidecarProcess("--port", str(vllm_engine.port), "--engine", "vllm") as s:
        assert ignores_all(s.pid, IGNORED_SIGNALS)  # from before it listens
        for signum in IGNORED_SIGNALS:
            s.send_signal(signum)
        assert s.work()["read"]["outcome"] == "idle"
        assert s.get_json("/readyz")[0] == 200
        s.send_signal(signal.SIGQUIT)
        assert s.wait(5) == 0
    assert events_named(s, "stopped")[0]["reason"] == "interrupted"
