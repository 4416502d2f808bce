"""The token file and the bearer check: constant-time, re-read on rotation, closed when broken; then
on a real server, on, off, and rotated the way kubelet rotates a Secret."""

import asyncio
import json
import os
import threading
import time

import pytest

from modeldrain.sidecar.auth import TokenFile, TokenFileError, read_token

from .secret_volume import k8s_secret
from .sidecar_process import SidecarProcess


def test_right_wrong_and_missing_tokens(tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret\n")
    tokens = TokenFile(str(path))
    assert tokens.check("Bearer s3cret").ok
    assert tokens.check("bearer   s3cret ").ok
    assert not tokens.check("Bearer s3cre").ok
    assert not tokens.check("Bearer s3cret2").ok
    assert not tokens.check("Basic s3cret").ok
    assert not tokens.check("Bearer").ok
    assert not tokens.check(None).ok
    assert "missing" in tokens.check(None).reason
    assert "s3cre" not in tokens.check("Bearer s3cre").reason  # never echoes what was sent


def test_rotation_through_the_data_symlink_swap(tmp_path):
    path = k8s_secret(tmp_path, "first", 1)
    changes = []
    tokens = TokenFile(str(path), changes.append, overlap_s=0)  # revoked at once
    assert tokens.check("Bearer first").ok
    k8s_secret(tmp_path, "second", 2)
    assert tokens.check("Bearer first").ok  # no I/O in a check: the token of the last refresh
    tokens.refresh()
    assert not tokens.check("Bearer first").ok
    assert tokens.check("Bearer second").ok
    assert len(changes) == 1


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_after_a_rotation_the_previous_token_is_accepted_for_the_overlap_only(tmp_path):
    """Issue 30, 4: kubelet refreshes a Secret on each node at its own time; a client that still sends
    the previous token is not locked out for the overlap, and is after it."""
    path = k8s_secret(tmp_path, "first", 1)
    clock, changes = FakeClock(), []
    tokens = TokenFile(str(path), changes.append, overlap_s=300, clock=clock)
    k8s_secret(tmp_path, "second", 2)
    tokens.refresh()
    assert tokens.check("Bearer second").ok and tokens.check("Bearer first").ok
    assert "previous token stays accepted for 300 s" in changes[-1]
    clock.now += 299.9
    assert tokens.check("Bearer first").ok
    clock.now += 0.2
    assert not tokens.check("Bearer first").ok and tokens.check("Bearer second").ok
    k8s_secret(tmp_path, "third", 3)  # a second rotation bridges only from the token just replaced
    tokens.refresh()
    assert tokens.check("Bearer second").ok and not tokens.check("Bearer first").ok


def test_a_file_of_two_tokens_accepts_both_and_a_broken_file_bridges_nothing(tmp_path):
    path = k8s_secret(tmp_path, "old", 1)
    clock = FakeClock()
    tokens = TokenFile(str(path), overlap_s=300, clock=clock)
    k8s_secret(tmp_path, "old\nnew", 2)  # the rotation's first step: both, the old one still sent
    tokens.refresh()
    assert tokens.check("Bearer old").ok and tokens.check("Bearer new").ok
    assert not tokens.check("Bearer old\nnew").ok and not tokens.check("Bearer oldnew").ok
    (tmp_path / "..2" / "token").write_text("")  # broken in place: fails closed, the overlap included
    os.utime(tmp_path / "..2" / "token", ns=(1, 1))
    tokens.refresh()
    assert not tokens.check("Bearer old").ok and not tokens.check("Bearer new").ok


def test_same_size_rewrite_in_place_is_seen(tmp_path):
    path = tmp_path / "token"
    path.write_text("aaaa")
    tokens = TokenFile(str(path))
    os.utime(path, ns=(1, 1))
    path.write_text("bbbb")
    tokens.refresh()
    assert tokens.check("Bearer bbbb").ok


def test_a_file_that_goes_bad_fails_closed_and_recovers(tmp_path):
    path = tmp_path / "token"
    path.write_text("good")
    changes = []
    tokens = TokenFile(str(path), changes.append)
    path.write_text("   \n")
    tokens.refresh()
    verdict = tokens.check("Bearer good")
    assert not verdict.ok and "no valid token" in verdict.reason and str(tmp_path) not in verdict.reason
    assert "empty" in changes[-1]  # the detail goes to the log
    path.unlink()
    tokens.refresh()
    assert not tokens.check("Bearer good").ok
    path.write_text("good-again")
    tokens.refresh()
    assert tokens.check("Bearer good-again").ok
    assert len(changes) == 3


@pytest.mark.parametrize("content, problem", [
    (b"", "empty"), (b"two words", "spaces"), (b"x" * 5000, "larger than 4096 bytes"), (b"caf\xc3\xa9", "non-ASCII"),
    (b"one\ntwo\nthree\n", "more than 2 lines"), (b"one\n\ntwo", "blank line"),
])
def test_unusable_token_files_are_refused_at_start(tmp_path, content, problem):
    path = tmp_path / "token"
    path.write_bytes(content)
    with pytest.raises(TokenFileError, match=problem):
        read_token(str(path))
    with pytest.raises(TokenFileError):
        TokenFile(str(path))


def test_a_fifo_token_file_is_refused_at_start_without_blocking(tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    with pytest.raises(TokenFileError, match="not a regular file"):
        read_token(str(fifo))


def test_refresh_runs_off_the_loop_and_is_bounded(tmp_path):
    path = tmp_path / "token"
    path.write_text("first")
    tokens = TokenFile(str(path))
    stuck = threading.Event()

    def hung_refresh():
        stuck.wait(10)  # a volume that does not answer

    async def scenario():
        path.write_text("second")
        await tokens.refreshed(1.0)  # the real refresh, on its thread
        assert tokens.check("Bearer second").ok
        tokens.refresh = hung_refresh
        loop_ran = []
        started = time.monotonic()
        ticker = asyncio.get_running_loop().call_later(0.05, loop_ran.append, True)
        with pytest.raises(TimeoutError):
            await tokens.refreshed(0.3)
        assert loop_ran and time.monotonic() - started < 2  # the loop kept running meanwhile
        ticker.cancel()
        with pytest.raises(TimeoutError):  # a second request shares the stuck refresh, not a new thread
            await tokens.refreshed(0.1)

    try:
        asyncio.run(scenario())
    finally:
        stuck.set()


def test_missing_token_file_is_refused_at_start(tmp_path):
    with pytest.raises(TokenFileError, match="cannot read"):
        read_token(str(tmp_path / "nope"))


# --- on a real server ---

V1 = ("/v1/work", "/v1/openapi.json", "/v1/anything")
OPEN = ("/healthz", "/readyz", "/metrics")


@pytest.fixture(scope="module")
def secret_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("secret")


@pytest.fixture(scope="module")
def guarded(vllm_engine, secret_dir):
    path = k8s_secret(secret_dir, "first-token", 1)
    with SidecarProcess("--port", str(vllm_engine.port), "--token-file", str(path)) as s:
        yield s


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("headers", [{}, bearer("wrong"), {"Authorization": "Basic Zmlyc3QtdG9rZW4="},
                                     bearer("first-token-and-more")])
def test_v1_needs_the_token(guarded, headers):
    for path in V1:
        status, body, got = guarded.request("GET", path, headers)
        assert status == 401, path
        assert json.loads(body)["error"] == "unauthorized"
        assert got["www-authenticate"].startswith("Bearer")


def test_the_token_opens_v1_and_probes_stay_open(guarded):
    assert guarded.work(bearer("first-token"))["read"]["outcome"] == "idle"
    assert guarded.request("GET", "/v1/openapi.json", bearer("first-token"))[0] == 200
    assert guarded.request("GET", "/v1/anything", bearer("first-token"))[0] == 404
    for path in OPEN:
        assert guarded.request("GET", path)[0] == 200, path


def test_rotation_takes_effect_on_the_next_request(guarded, secret_dir):
    assert guarded.request("GET", "/v1/work", bearer("first-token"))[0] == 200
    k8s_secret(secret_dir, "second-token", 2)
    assert guarded.request("GET", "/v1/work", bearer("second-token"))[0] == 200
    assert guarded.request("GET", "/v1/work", bearer("first-token"))[0] == 200  # the overlap (300 s)
    assert guarded.request("GET", "/v1/work", bearer("third-token"))[0] == 401
    assert any(e["event"] == "token_file_changed" for e in guarded.events())


def test_a_rotation_under_load_answers_no_read_401_and_ends_the_overlap(tmp_path, vllm_engine):
    """Issue 30, 4: during a rotation every read where the controller and the sidecar disagreed was a 401.
    Real sidecar, kubelet's Secret layout, four clients reading back to back: two still on the old token
    (their node not refreshed yet), two on the new one once the file changed; then all on the new."""
    path = k8s_secret(tmp_path, "old-token", 1)
    with SidecarProcess("--port", str(vllm_engine.port), "--token-file", str(path), "--token-overlap", "3") as s:
        statuses: dict[str, list[int]] = {"old": [], "new": []}
        stop = threading.Event()
        rotated = threading.Event()

        def client(kind: str) -> None:
            while not stop.is_set():
                token = "new-token" if kind == "new" and rotated.is_set() else "old-token"
                statuses[kind].append(s.request("GET", "/v1/work", bearer(token))[0])

        threads = [threading.Thread(target=client, args=(kind,)) for kind in ("old", "old", "new", "new")]
        for t in threads:
            t.start()
        time.sleep(1.0)
        k8s_secret(tmp_path, "new-token", 2)  # kubelet's atomic swap of ..data
        deadline_at = time.monotonic() + 5
        while s.request("GET", "/v1/work", bearer("new-token"))[0] != 200:  # the sidecar has seen it
            assert time.monotonic() < deadline_at, "the new token never took effect"
        rotated.set()
        time.sleep(1.5)  # inside the 3 s overlap
        stop.set()
        for t in threads:
            t.join(30)
        assert len(statuses["old"]) > 10 and len(statuses["new"]) > 10
        assert set(statuses["old"]) == set(statuses["new"]) == {200}
        time.sleep(2.0)  # past the overlap
        assert s.request("GET", "/v1/work", bearer("old-token"))[0] == 401
        assert s.request("GET", "/v1/work", bearer("new-token"))[0] == 200


def test_without_a_token_file_v1_is_open_and_the_log_says_so(sidecar):
    assert sidecar.request("GET", "/v1/work")[0] == 200
    assert sidecar.request("GET", "/v1/work", bearer("anything"))[0] == 200
    warnings = [e for e in sidecar.events() if e["event"] == "api_open"]
    assert warnings and warnings[0]["level"] == "warning" and "/v1/*" in warnings[0]["message"]
