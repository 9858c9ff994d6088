"""OpenAPI post-processing: every operation documents the one error envelope.

Errors leave the API as ``{"error": {code, message, operation, details, retryable}}``
(``memory_project.errors``); this hook adds that schema, as ``ErrorEnvelope``, under the
statuses an operation can answer with, so that clients (and schema checks) know them.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema

from memory_project.validation import STORABLE_TEXT_PATTERN

ENVELOPE = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["code", "message", "operation", "details", "retryable"],
        "properties": {
            "code": {"type": "string", "description": "e.g. MEMORY_NOT_FOUND (seed 001)"},
            "message": {"type": "string"},
            "operation": {"type": "string"},
            "details": {"type": "object", "additionalProperties": True},
            "retryable": {"type": "boolean"},
        },
    }},
}

#: status → description, for every operation.
COMMON = {
    "400": "Invalid input (INVALID_INPUT, INVALID_LAYER, MISSING_IDENTIFIER, ...).",
    "401": "No or an invalid API key (MISSING_TENANT_CONTEXT, INVALID_TENANT_CONTEXT).",
    "403": "The key's role does not allow this (UNAUTHORIZED).",
    "404": "Not found; another tenant's object answers the same.",
    "429": "Rate limited (RATE_LIMITED); see Retry-After.",
    "503": "A backend is unavailable (retryable); see Retry-After.",
}
#: Added for operations with a request body or side effects.
WRITES = {
    "409": "Conflict (VERSION_CONFLICT, REVIEW_ALREADY_DECIDED, an identifier in use).",
    "413": "Request body too large (PAYLOAD_TOO_LARGE).",
    "415": "Unsupported media type: send application/json.",
    "422": "Refused by a tenant policy (POLICY_VIOLATION).",
}


def storable_text(result: dict[str, Any], generator: Any, request: Any,
                  public: bool) -> dict[str, Any]:
    """drf-spectacular ``POSTPROCESSING_HOOKS`` entry: every free-text string of a request
    body or query parameter without a pattern of its own says that it cannot hold NUL
    (``validation.STORABLE_TEXT_PATTERN``; ``validation.no_nul`` and DRF's ``CharField``
    refuse it)."""
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "string" and not ({"pattern", "enum", "format"} & set(node)):
                node["pattern"] = STORABLE_TEXT_PATTERN
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request"):
            walk(schema)
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                walk(parameter.get("schema"))
    return result


def error_responses(result: dict[str, Any], generator: Any, request: Any,
                    public: bool) -> dict[str, Any]:
    """drf-spectacular ``POSTPROCESSING_HOOKS`` entry: add ``ErrorEnvelope`` responses."""
    result.setdefault("components", {}).setdefault("schemas", {})["ErrorEnvelope"] = ENVELOPE
    ref = {"$ref": "#/components/schemas/ErrorEnvelope"}
    for path, operations in result.get("paths", {}).items():
        if not path.startswith(("/api/v1/", "/api/agents/")):
            continue
        for method, operation in operations.items():
            statuses = dict(COMMON)
            if method in ("post", "put", "patch", "delete"):
                statuses.update(WRITES)
            responses = operation.setdefault("responses", {})
            for status, description in statuses.items():
                responses.setdefault(status, {
                    "description": description,
                    "content": {"application/json": {"schema": ref}},
                })
    return result


class EnvelopedListSchema(AutoSchema):
    """For viewsets whose ``list`` answers an object (``{"policies": [...]}``,
    ``{"memories": [...], ...}``) rather than a bare array."""

    def _is_list_view(self, serializer: Any = None) -> bool:
        return False
