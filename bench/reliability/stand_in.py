"""A stand-in engine process for the hostile bench: it listens on a socket of its own, so the kernel's
tables show it as that process's listener, and answers every request with one canned response.

    STAND_IN_PAYLOAD=file STAND_IN_READY=file python stand_in.py [serve m] [--host H] --port P

Run through a script named `vllm` (`vllm serve m --port P`), it is a vLLM engine to the hook; named
otherwise, someone else's process. `--host` with a `:` binds IPv6 only (IPV6_V6ONLY), as an engine
started on `--host ::` does where the node turns dual-stack off. The last `--host` and `--port` win,
as argparse's do. The port it bound is written to $STAND_IN_READY once it listens.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

HEAD_END = b"\r\n\r\n"
MAX_HEAD_BYTES = 65536
READ_TIMEOUT_S = 5.0


def last_value(argv: list[str], flag: str, default: str) -> str:
    found = default
    for i, word in enumerate(argv[:-1]):
        if word == flag:
            found = argv[i + 1]
    return found


def answer(conn: socket.socket, payload: bytes) -> None:
    with conn:
        conn.settimeout(READ_TIMEOUT_S)
        head = b""
        try:
            while HEAD_END not in head and len(head) < MAX_HEAD_BYTES:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            conn.sendall(payload)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            return  # the reader left: nothing to answer


def main(argv: list[str]) -> None:
    host = last_value(argv, "--host", "0.0.0.0")
    port = int(last_value(argv, "--port", "0"))
    with open(os.environ["STAND_IN_PAYLOAD"], "rb") as f:
        payload = f.read()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    if family == socket.AF_INET6:
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    server.bind((host, port))
    server.listen(64)
    ready = os.environ["STAND_IN_READY"]
    with open(ready + ".tmp", "w") as f:
        f.write(str(server.getsockname()[1]))
    os.rename(ready + ".tmp", ready)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=answer, args=(conn, payload), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1:])
