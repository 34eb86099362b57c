"""The document's components: the version, client-token and If-Match parameters, the
response headers, Ironic's error body and one error response per status."""

from __future__ import annotations

from typing import Any, Final

from apimw.etag import IF_MATCH_HEADER
from apimw.idempotency import CLIENT_TOKEN_HEADER
from apimw.microversion import STANDARD_HEADER
from baremetal_service import versions
from baremetal_service.openapi.builder import Builder
from baremetal_service.openapi.declarations import ERROR_STATUSES, LINK

ERROR_TITLES: Final = {
    400: "Bad request (schema, malformed JSON, bad parameter)",
    403: "Forbidden by policy",
    404: "Not found (or not served at this version)",
    406: "Not acceptable (a field, parameter or verb newer than the served version, or the version "
    "itself)",
    409: "Conflict (duplicate, state, X-Client-Token reused or in flight)",
    412: "Precondition failed (If-Match does not match the current etag)",
    413: "Request body too large",
    415: "The body's Content-Type is not JSON (a body without one is read as JSON)",
}

ERROR: Final[dict[str, Any]] = {
    "type": "object",
    "description": "Ironic's error body: error_message is a JSON document serialized as a string.",
    "properties": {
        "error_message": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "type": "object",
                "properties": {
                    "faultcode": {"type": "string", "enum": ["Client", "Server"]},
                    "faultstring": {"type": "string"},
                    "description": {"type": "string"},
                    "debuginfo": {"type": ["string", "null"]},
                },
                "required": ["faultcode", "faultstring"],
            },
        },
        "errors": {
            "type": "array",
            "description": "apimw's stable error codes (the same error, machine-readable).",
            "items": {
                "type": "object",
                "properties": {
                    "status": {"type": "integer"},
                    "code": {"type": "string"},
                    "title": {"type": "string"},
                    "detail": {"type": "string"},
                    "request_id": {"type": ["string", "null"]},
                },
                "required": ["status", "code", "title", "detail"],
            },
        },
    },
    "required": ["error_message"],
}


def components(b: Builder) -> dict[str, Any]:
    """The shared parameters, headers, error responses and schemas of *b*'s version."""
    served = str(b.version)
    version_header = {"type": "string", "pattern": r"^(latest|\d+\.\d+)$"}
    parameters: dict[str, Any] = {
        "LegacyVersion": {
            "name": versions.LEGACY_HEADER, "in": "header", "required": False,
            "description": "The microversion (MAJOR.MINOR or 'latest'); without any version header "
                           "the minimum is served.",
            "schema": {**version_header, "enum": [served]},
        },
        "StandardVersion": {
            "name": STANDARD_HEADER, "in": "header", "required": False,
            "description": "'baremetal MAJOR.MINOR' (wins over the legacy header).",
            "schema": {"type": "string", "enum": [f"baremetal {served}"]},
        },
        "ClientToken": {
            "name": CLIENT_TOKEN_HEADER, "in": "header", "required": False,
            "description": "Idempotency token: a retry with the same token and request replays the "
                           "first answer (Idempotent-Replayed: true); the same token with another "
                           "request, or while the first is in flight, is a 409.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 255,
                       "pattern": "^[A-Za-z0-9._~:-]+$"},
        },
    }  # fmt: skip
    if b.etags:
        parameters["IfMatch"] = {
            "name": IF_MATCH_HEADER, "in": "header", "required": False,
            "description": "Entity tags (or *): the write happens only if one matches the current "
                           "etag, checked atomically with the write; otherwise 412.",
            "schema": {"type": "string"}, "x-introduced-in": str(versions.ETAG_VERSION),
        }  # fmt: skip
    headers: dict[str, Any] = {
        "MinimumVersion": {"required": True,
                           "schema": {"type": "string", "const": str(versions.MIN_VERSION)}},
        "MaximumVersion": {"required": True,
                           "schema": {"type": "string", "const": str(versions.MAX_VERSION)}},
        "ServedVersion": {"description": "The version that served the request (absent when the "
                                         "requested version was refused).",
                          "schema": {"type": "string", "const": served}},
        "ServedStandardVersion": {"schema": {"type": "string", "const": f"baremetal {served}"}},
        "Location": {"required": True, "schema": {"type": "string"}},
        "IdempotentReplayed": {"description": "Present (true) when this is a replayed answer.",
                               "schema": {"type": "string", "enum": ["true"]}},
    }  # fmt: skip
    if b.etags:
        headers["ETag"] = {
            "required": True,
            "description": "The resource's entity tag (weak), also its `etag` field.",
            "schema": {"type": "string", "pattern": '^(W/)?"[^"]*"$'},
            "x-introduced-in": str(versions.ETAG_VERSION),
        }
    responses: dict[str, Any] = {}
    for status in ERROR_STATUSES:
        if status == 412 and not b.etags:
            continue
        err = b.response(status, ERROR_TITLES[status], {"$ref": "#/components/schemas/Error"})
        err["headers"][versions.LEGACY_HEADER] = {"$ref": "#/components/headers/ServedVersion"}
        responses[f"Error{status}"] = err
    b.schemas["Link"] = LINK
    b.schemas["Error"] = ERROR
    return {
        "schemas": dict(sorted(b.schemas.items())),
        "parameters": parameters,
        "headers": headers,
        "responses": responses,
    }

