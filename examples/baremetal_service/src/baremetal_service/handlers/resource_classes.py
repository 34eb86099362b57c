"""``/v1/resource_classes`` (microversion 1.117): idempotent ``PUT`` per placement's spec.

``PUT /v1/resource_classes/{name}`` with an empty body creates the class (201)
or confirms that it exists (204); a body is refused (400) so a rename can
never be expressed; the name must match ``CUSTOM_[A-Z0-9_]+`` (400 otherwise).
``POST /v1/resource_classes {"name": ...}`` is kept (409 when it exists).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from apimw.errors import HTTPProblem
from apimw.etag import mark_enforced
from baremetal_service import schemas, versions
from baremetal_service.handlers import common, serialize
from baremetal_service.handlers.context import if_match, service
from baremetal_service.handlers.json_schema import ecma_regex

bp = Blueprint("resource_classes", __name__)

_NAME_RE = ecma_regex(schemas.RESOURCE_CLASS_NAME)


def _gate() -> None:
    # Like Ironic for a resource newer than the request (portgroups before 1.23): 404.
    if common.api_version() < versions.RESOURCE_CLASS_VERSION:
        raise HTTPProblem(404, "request.not-found", "The resource could not be found.")


def _check_name(name: str) -> None:
    if len(name) > schemas.RESOURCE_CLASS_MAX_LENGTH or not _NAME_RE.match(name):
        raise common.bad_request(
            f"Invalid resource class name {common.quote(name)}: custom resource classes must match "
            f"CUSTOM_[A-Z0-9_]+ and be at most {schemas.RESOURCE_CLASS_MAX_LENGTH} characters long.",
            "baremetal.invalid-resource-class",
        )


def _doc(rc: Any) -> dict[str, Any]:
    name = serialize.get(rc, "name")
    return {
        "name": name,
        "created_at": serialize.get(rc, "created_at"),
        "updated_at": serialize.get(rc, "updated_at"),
        "links": common.make_links("resource_classes", name),
    }


def _check_if_match(name: str) -> None:
    """If-Match on a resource class, which carries no etag (RFC 9110 section 13.1.1).

    ``*`` is true when the class exists; any entity-tag can never match: 412, nothing written.
    """
    cond = if_match()
    if cond is None:
        return
    exists = True
    if getattr(cond, "any", False):
        try:
            service().get_resource_class(name)
        except HTTPProblem as problem:
            if problem.status != 404:
                raise
            exists = False
    else:
        exists = False
    if not exists:
        raise HTTPProblem(
            412,
            "etag.precondition-failed",  # the code of every 412 (exceptions.PreconditionFailed)
            f"Resource class {name} does not match the If-Match condition "
            "(resource classes have no etag; only If-Match: * is meaningful).",
        )
    mark_enforced(request.environ)


def _location(name: str) -> list[tuple[str, str]]:
    return [common.location("resource_classes", name)]


@bp.route("/v1/resource_classes", methods=["GET"])
def list_resource_classes() -> Response:
    _gate()
    return common.json_response({"resource_classes": [_doc(rc) for rc in service().list_resource_classes()]})


@bp.route("/v1/resource_classes/<name>", methods=["GET"])
def get_resource_class(name: str) -> Response:
    _gate()
    return common.json_response(_doc(service().get_resource_class(name)))


@bp.route("/v1/resource_classes/<name>", methods=["PUT"])
def put_resource_class(name: str) -> Response:
    _gate()
    # "the PUT requires no body": any body (even {}) is refused, so no rename can be asked for.
    if common.raw_body().strip():
        raise HTTPProblem(
            400,
            "baremetal.resource-class-body",
            "PUT /v1/resource_classes/{name} takes no body; the name in the URL is the whole "
            "resource class (renaming is not possible).",
        )
    _check_name(name)
    _check_if_match(name)
    created = service().ensure_resource_class(name)
    if created:
        return common.empty_response(201, _location(name))
    return common.empty_response(204)


@bp.route("/v1/resource_classes", methods=["POST"])
def create_resource_class() -> Response:
    _gate()
    body = common.json_body()
    if isinstance(body, dict) and isinstance(body.get("name"), str):
        _check_name(body["name"])
    common.validate(body, schemas.RESOURCE_CLASS_CREATE, "resource class")
    rc = service().create_resource_class(body["name"])
    return common.json_response(_doc(rc), 201, _location(body["name"]))


@bp.route("/v1/resource_classes/<name>", methods=["DELETE"])
def delete_resource_class(name: str) -> Response:
    _gate()
    _check_if_match(name)
    service().delete_resource_class(name)
    return common.empty_response(204)
