"""The JSON error body every failure answers with: a stable code for programs, a message for people."""

from __future__ import annotations

import json

__all__ = [
    "BAD_REQUEST", "FORBIDDEN", "INTERNAL_ERROR", "NOT_FOUND", "READ_TIMEOUT", "REQUEST_TOO_LARGE",
    "TOKEN_FILE_UNAVAILABLE", "TOO_MANY_CONNECTIONS", "TOO_MANY_DRAIN_CALLS", "UNAUTHORIZED", "code_for_status",
    "error_body",
]

# Stable codes; the OpenAPI document lists the same set.
UNAUTHORIZED = "unauthorized"
NOT_FOUND = "not_found"
METHOD_NOT_ALLOWED = "method_not_allowed"
BAD_REQUEST = "bad_request"
REQUEST_TOO_LARGE = "request_too_large"
READ_TIMEOUT = "read_timeout"
INTERNAL_ERROR = "internal_error"
TOO_MANY_CONNECTIONS = "too_many_connections"
TOKEN_FILE_UNAVAILABLE = "token_file_unavailable"
TOO_MANY_DRAIN_CALLS = "too_many_drain_calls"
FORBIDDEN = "forbidden"

# For statuses that aiohttp raises itself (routing, request parsing).
BY_STATUS = {
    400: BAD_REQUEST,
    403: FORBIDDEN,
    404: NOT_FOUND,
    405: METHOD_NOT_ALLOWED,
    413: REQUEST_TOO_LARGE,
    431: REQUEST_TOO_LARGE,
    500: INTERNAL_ERROR,
}


def code_for_status(status: int) -> str:
    return BY_STATUS.get(status, BAD_REQUEST if status < 500 else INTERNAL_ERROR)


def error_body(code: str, message: str) -> str:
    return json.dumps({"error": code, "message": message}, separators=(",", ":"))
