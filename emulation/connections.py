"""Ending HTTP connections without a response, the way a dying engine does.

aiohttp has no public "drop this request" call; closing the request's protocol is it. The handler
then returns any response, and aiohttp, finding the transport gone, writes nothing and moves on
(its "premature client disconnection" path).
"""

from __future__ import annotations

from aiohttp import web


def drop(request: web.BaseRequest) -> web.StreamResponse:
    """Close the request's connection now; return what the handler should return (never sent)."""
    protocol = request.protocol
    if protocol is not None:
        protocol.force_close()
    return web.Response(status=499)


def drop_all(server: web.Server) -> int:
    """Close every connection the server holds, busy or idle; returns how many."""
    handlers = server.connections
    for handler in handlers:
        handler.force_close()
    return len(handlers)


def close_all_but(server: web.Server, kept: set) -> int:
    """Close every connection except `kept` (request protocols); returns how many were closed."""
    closing = [handler for handler in server.connections if handler not in kept]
    for handler in closing:
        handler.force_close()
    return len(closing)
