"""The JSON error body: a stable code for programs, a message for people."""

import json

import pytest

from modeldrain.sidecar import errors


def test_error_body_is_compact_json_with_code_and_message():
    assert json.loads(errors.error_body(errors.NOT_FOUND, "no such route")) == {
        "error": "not_found", "message": "no such route"}


@pytest.mark.parametrize("status, code", [
    (400, "bad_request"), (404, "not_found"), (405, "method_not_allowed"), (413, "request_too_large"),
    (431, "request_too_large"), (418, "bad_request"), (500, "internal_error"), (502, "internal_error"),
])
def test_statuses_aiohttp_raises_map_to_stable_codes(status, code):
    assert errors.code_for_status(status) == code
