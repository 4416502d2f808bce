"""The retirement protocol's reference client: the controller's decision, in the standard library.

A client of drain-sidecar's `GET /v1/work`, kept out of the server's package: a controller copies
modeldrain/retirement/client.py; `modeldrain retirement` (and `drain-sidecar retirement`) run it for people.
"""

__all__ = []
