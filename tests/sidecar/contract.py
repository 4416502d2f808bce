"""The /v1/work contract, checked strictly: every answer a test sees can be validated against it.

openapi-schema-validator's strict OpenAPI 3.0 validator (types and formats as the document states
them, `nullable` as 3.0 defines it) on the document's own schemas. schemathesis' checks are
lenient about both; a Go or Java client generated from the document is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from openapi_schema_validator import OAS30StrictValidator, oas30_strict_format_checker

from modeldrain import sidecar as package

SPEC_PATH = Path(package.__file__).parent / "openapi.json"
SPEC: dict[str, Any] = json.loads(SPEC_PATH.read_text())
SCHEMAS: dict[str, Any] = SPEC["components"]["schemas"]

_VALIDATORS = {name: OAS30StrictValidator(schema, format_checker=oas30_strict_format_checker)
               for name, schema in SCHEMAS.items()}


def violations(name: str, body: Mapping[str, Any]) -> list[str]:
    """Every way `body` breaks the document's schema `name`, as 'path: message'."""
    return [f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
            for error in _VALIDATORS[name].iter_errors(body)]


def assert_work(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """`body` is a valid /v1/work answer; returns it for chaining."""
    problems = violations("Work", body)
    assert not problems, f"/v1/work answer breaks the contract: {problems}\n{json.dumps(body, indent=1)}"
    return body


def assert_error(body: Mapping[str, Any]) -> Mapping[str, Any]:
    problems = violations("Error", body)
    assert not problems, f"error answer breaks the contract: {problems}: {body}"
    return body
