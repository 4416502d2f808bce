"""The router of a vLLM prefill/decode pair: each completion goes to the prefill server (one token,
its KV kept for the decoder) and, at once, to the decode server, which pulls that KV and answers.

    with KvProxy(prefill_url, decode_url, prefill_engine_id, bootstrap_url) as proxy:
        proxy.base_url                           # where a client sends /v1/completions
        proxy.prefill_failures()                 # prefill requests that did not end with HTTP 200

vLLM ships no router of its own; this is the protocol of its MooncakeConnector example proxy
(examples/online_serving/disaggregated_serving/mooncake_connector/) as vLLM 0.32's connector reads it:
the two requests share a `transfer_id`; the prefill server's asks `do_remote_decode` (it finishes
after one token, length-capped, and parks the request's KV blocks); the decode server's asks
`do_remote_prefill`, naming the prefill engine's id and its bootstrap server, where the decoder
learns the prefill workers' transfer addresses. The client gets the decode server's answer.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from engines.servers import START_TIMEOUT_S

ROUTES = ("/v1/completions", "/v1/chat/completions")


def _post(base_url: str, path: str, body: dict) -> tuple[int, bytes]:
    parsed = urllib.parse.urlsplit(base_url)
    connection = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port, timeout=START_TIMEOUT_S)
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class KvProxy:
    def __init__(self, prefill_url: str, decode_url: str, prefill_engine_id: str, bootstrap_url: str):
        self.prefill_url = prefill_url
        self.decode_url = decode_url
        self.prefill_engine_id = prefill_engine_id
        self.bootstrap_url = bootstrap_url
        self._lock = threading.Lock()
        self._prefill_outcomes: list[str] = []  # "200", "HTTP 500", or the error, one per request
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="kv-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def prefill_failures(self) -> list[str]:
        with self._lock:
            return [o for o in self._prefill_outcomes if o != "200"]

    def prefill_requests(self) -> int:
        with self._lock:
            return len(self._prefill_outcomes)

    def bodies(self, body: dict) -> tuple[dict, dict]:
        """The prefill server's request and the decode server's, for one client request."""
        transfer_id = str(uuid.uuid4())
        prefill = dict(body, max_tokens=1, stream=False,
                       kv_transfer_params={"do_remote_decode": True, "transfer_id": transfer_id})
        prefill.pop("stream_options", None)
        decode = dict(body, kv_transfer_params={"do_remote_prefill": True, "transfer_id": transfer_id,
                                                "remote_engine_id": self.prefill_engine_id,
                                                "remote_bootstrap_addr": self.bootstrap_url})
        return prefill, decode

    def _prefill(self, path: str, body: dict) -> None:
        try:
            status, _ = _post(self.prefill_url, path, body)
            outcome = str(status) if status == HTTPStatus.OK else f"HTTP {status}"
        except OSError as error:
            outcome = f"{type(error).__name__}: {error}"
        with self._lock:
            self._prefill_outcomes.append(outcome)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
                pass

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._answer(HTTPStatus.OK if self.path == "/health" else HTTPStatus.NOT_FOUND, b"{}")

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                if self.path not in ROUTES:
                    self._answer(HTTPStatus.NOT_FOUND, b"{}")
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                prefill, decode = proxy.bodies(body)
                sender = threading.Thread(target=proxy._prefill, args=(self.path, prefill), daemon=True)
                sender.start()
                try:
                    status, answer = _post(proxy.decode_url, self.path, decode)
                except OSError as error:
                    status, answer = HTTPStatus.BAD_GATEWAY, json.dumps({"error": str(error)}).encode()
                sender.join()
                self._answer(status, answer)

        return Handler

    def start(self) -> KvProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> KvProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
