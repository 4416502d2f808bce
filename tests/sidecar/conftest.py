import pytest

from emulation.engine_process import EngineProcess

from .sidecar_process import SidecarProcess, kill_now


@pytest.fixture(scope="module")
def vllm_engine():
    with EngineProcess("--kind", "vllm") as engine:
        yield engine
        kill_now(engine)


@pytest.fixture(scope="module")
def sidecar(vllm_engine, tmp_path_factory):
    """A sidecar reading the module's vLLM emulator, with a short read timeout so hangs are quick.

    Its /proc is an empty directory: this machine's shows the engines other tests launch."""
    with SidecarProcess("--port", str(vllm_engine.port), "--engine", "vllm", "--read-timeout", "0.5",
                        "--max-body-bytes", "1048576", "--proc-root", str(tmp_path_factory.mktemp("proc")),
                        env={"POD_NAMESPACE": "team-a", "POD_NAME": "replica-0-abc", "POD_UID": "uid-0",
                             "MEMBER_CONFIGURATION": "rev-1", "LWS_WORKER_INDEX": "0", "LWS_GROUP_SIZE": "2"}) as s:
        yield s
