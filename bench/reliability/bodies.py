"""What a hostile engine sends: the bodies and raw HTTP responses the reliability figures serve.

Each is one way an engine's /metrics broke a reader once (issue 12), or the worst the reader's
caps admit. They are served byte for byte by a scripted listener (emulation/raw_server.py),
so the programs read them over a real socket exactly as they would read an engine.
"""

from __future__ import annotations

from pathlib import Path

from emulation.raw_server import http_response

REPO = Path(__file__).resolve().parents[2]
# Bodies that once broke a reader, replayed by tests/hook/test_exposition_differential.py too.
CORPUS = REPO / "tests" / "hook" / "corpus" / "exposition"

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"

# An engine with work in flight, and the same engine idle (vLLM's two work gauges).
BUSY_VLLM = b'vllm:num_requests_running{engine="0"} 2\nvllm:num_requests_waiting{engine="0"} 1\n'
IDLE_VLLM = b'vllm:num_requests_running{engine="0"} 0\nvllm:num_requests_waiting{engine="0"} 0\n'

# A float holds integers up to ~1.8e308: one with more digits is an int prometheus-client gives
# back as such, and float() of it raises OverflowError.
TOO_LARGE_FOR_A_FLOAT = "1" + "0" * 400

# A label costs prometheus-client's text parser more the more labels precede it on the line
# (superlinear in the labels of one line). The bodies: lines of thousands of labels.
MANY_LABELS = 3000
# The reader's cap on a line (hook/exposition.py MAX_LINE_CHARS): a line just under it is the
# most one line may cost and still be parsed.
LINE_CAP_CHARS = 4096


def http_200(body: bytes, content_type: str = TEXT) -> bytes:
    """A 200 as a real engine labels its exposition (with the charset)."""
    return http_response(body, content_type=content_type)


def chunked_200(body: bytes, size_line: bytes) -> bytes:
    """A chunked 200 whose one chunk is announced by `size_line` (malformed, or absurdly large)."""
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {TEXT}\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n").encode() + size_line + b"\r\n" + body + b"\r\n0\r\n\r\n"


def vllm_body(running: str, waiting: str = "0", extra: str = "") -> bytes:
    return (f'vllm:num_requests_running{{engine="0"}} {running}\n'
            f'vllm:num_requests_waiting{{engine="0"}} {waiting}\n{extra}').encode()


def labelled_line(name: str, labels: int, value: str, tag: int = 0) -> str:
    """`name{a0="",a1="",...} value`: one sample line carrying `labels` labels."""
    inner = ",".join(f'a{i}=""' for i in range(labels - 1))
    return f'{name}{{{inner},line="{tag}"}} {value}\n'


def labels_to_fill(chars: int) -> int:
    """How many labels make a `labelled_line` about `chars` characters long."""
    per_label = len('a999="",')
    return max(2, (chars - 40) // per_label)


def heavy_idle_body(total_bytes: int, labels_per_line: int) -> bytes:
    """Idle work gauges, then other lines of `labels_per_line` labels up to `total_bytes`.

    The work gauges read idle on the fast path, so the reader must parse the whole body to confirm
    idle (hook/exposition.py): the body is all parse cost, bounded only by the reader's caps and
    its clock."""
    parts = [IDLE_VLLM.decode()]
    size = len(parts[0])
    tag = 0
    while size < total_bytes:
        line = labelled_line("engine_filler_info", labels_per_line, "1", tag)
        parts.append(line)
        size += len(line)
        tag += 1
    return "".join(parts).encode()


def corpus_bodies() -> list[tuple[str, bytes, str]]:
    """(name, body, content type) of every body in the corpus of bodies that broke a reader."""
    out = []
    for path in sorted(CORPUS.glob("*.txt")):
        content_type = OPENMETRICS if path.name.endswith(".om.txt") else TEXT
        out.append((path.name, path.read_bytes(), content_type))
    return out
