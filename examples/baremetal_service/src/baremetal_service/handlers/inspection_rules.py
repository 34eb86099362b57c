"""``/v1/inspection_rules`` (microversion 1.96), as Ironic serves it.

CRUD with JSON Patch, ``?detail=``, ``?fields=``, ``?phase=``, paging; ETag/If-Match
and ``X-Client-Token`` as every resource here.  Below 1.96 a GET is 404 and any
other method 405 (Ironic's answers).  Declared in :mod:`baremetal_service.objects.inspection_rules`;
validation and the ``sensitive`` rules live in
:mod:`baremetal_service.objects.inspection_rules`.

One deliberate difference: Ironic 39 links a rule as ``/v1/inspection/<uuid>``, a
path it does not serve; the links here point at ``/v1/inspection_rules/<uuid>``.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from apimw.errors import HTTPProblem
from baremetal_service import versions
from baremetal_service.handlers.common import UUID_RE, api_version, bad_request, check_args
from baremetal_service.handlers.resources import GET_ARGS, endpoints
from baremetal_service.objects.inspection_rules import RULE_CREATE
from baremetal_service.objects.inspection_rules import RULES as DECLARATION

__all__ = ["RULES", "RULE_CREATE", "bp"]

bp = Blueprint("inspection_rules", __name__)

RULES = endpoints(DECLARATION)


def _gate() -> None:
    if api_version() < versions.INSPECTION_RULES:
        status = 404 if request.method == "GET" else 405
        raise HTTPProblem(
            status,
            "request.not-found" if status == 404 else "request.method-not-allowed",
            "The API version does not allow inspection rules",
        )


def _check_uuid(ident: str) -> None:
    if not UUID_RE.match(ident):
        raise bad_request(
            f"Expected UUID for inspection_rule_uuid: {ident[:100]}", "request.invalid-parameter"
        )


@bp.route("/v1/inspection_rules", methods=["GET"])
def list_rules() -> Response:
    _gate()
    return RULES.index()


@bp.route("/v1/inspection_rules", methods=["POST"])
def create_rule() -> Response:
    _gate()
    return RULES.create()


@bp.route("/v1/inspection_rules/<ident>", methods=["GET"])
def get_rule(ident: str) -> Response:
    _gate()
    check_args(GET_ARGS)  # Ironic's first check
    _check_uuid(ident)
    return RULES.get(ident)


@bp.route("/v1/inspection_rules/<ident>", methods=["PATCH"])
def patch_rule(ident: str) -> Response:
    _gate()
    _check_uuid(ident)
    return RULES.patch(ident)


@bp.route("/v1/inspection_rules/<ident>", methods=["DELETE"])
def delete_rule(ident: str) -> Response:
    _gate()
    _check_uuid(ident)
    return RULES.delete(ident)
