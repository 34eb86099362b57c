"""``GET /v1/openapi.json``: the OpenAPI 3.1 document of the version this request is served at.

The version headers choose the document like any other answer: no header -> the minimum,
``latest`` -> the maximum, out of range -> the microversion middleware's 406.
"""

from __future__ import annotations

from flask import Blueprint, Response

from .common import api_version

bp = Blueprint("openapi", __name__)


@bp.route("/v1/openapi.json", methods=["GET"])
def openapi_document() -> Response:
    from ..openapi import document_json

    return Response(document_json(api_version()), status=200, content_type="application/json")
