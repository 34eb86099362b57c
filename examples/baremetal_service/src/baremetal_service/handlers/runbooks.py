"""``/v1/runbooks`` (Ironic 1.92) and ``/v1/runbooks/{id}/traits`` (1.112).

Declared in :mod:`baremetal_service.objects.runbooks` and served by the generic
endpoints; create picks the schema of the served version (before 1.112 a runbook's name must
be a trait); the traits sub-resource is Ironic's (PUT one trait or the whole list,
DELETE one or all; removing an absent trait is a no-op).
"""

from __future__ import annotations

from flask import Blueprint, Response

from apimw.errors import HTTPProblem
from baremetal_service import versions
from baremetal_service.handlers import common
from baremetal_service.handlers.context import if_match, project_id, service
from baremetal_service.handlers.resources import endpoints, item_routes
from baremetal_service.objects.runbooks import RUNBOOKS as DECLARATION
from baremetal_service.schemas import RUNBOOK_CREATE, RUNBOOK_CREATE_112, RUNBOOK_TRAITS, TRAIT

bp = Blueprint("runbooks", __name__)

RUNBOOKS = endpoints(DECLARATION)


@bp.route("/v1/runbooks", methods=["GET"])
def list_runbooks() -> Response:
    return RUNBOOKS.index()


@bp.route("/v1/runbooks/detail", methods=["GET"])
def list_runbooks_detail() -> Response:
    return RUNBOOKS.index(True, path="runbooks/detail")


@bp.route("/v1/runbooks", methods=["POST"])
def create_runbook() -> Response:
    RUNBOOKS.gate()
    traits_era = common.api_version() >= versions.RUNBOOK_TRAITS
    return RUNBOOKS.create(RUNBOOK_CREATE_112 if traits_era else RUNBOOK_CREATE)


item_routes(bp, RUNBOOKS)


# -- traits (1.112) ---------------------------------------------------------------------------


def _traits_gate() -> None:
    RUNBOOKS.gate()
    if common.api_version() < versions.RUNBOOK_TRAITS:
        raise HTTPProblem(404, "request.not-found", "The resource could not be found.")


@bp.route("/v1/runbooks/<ident>/traits", methods=["GET"])
def get_runbook_traits(ident: str) -> Response:
    _traits_gate()
    doc = service().crud["runbook"].get(ident, project_id=project_id())
    return common.json_response({"traits": list(doc.get("traits") or [])})


@bp.route("/v1/runbooks/<ident>/traits", methods=["PUT"])
def set_runbook_traits(ident: str) -> Response:
    _traits_gate()
    body = common.json_body()
    common.validate(body, RUNBOOK_TRAITS, "runbook traits")
    if "traits" not in body:
        raise common.bad_request(
            "A single runbook trait may be added via PUT /v1/runbooks/<runbook identifier>/traits/<trait> "
            "with no body, or all runbook traits may be replaced via PUT /v1/runbooks/<runbook identifier>"
            "/traits with the list of traits specified in the request body."
        )
    wanted = list(dict.fromkeys(body["traits"]))
    service().runbooks.set_runbook_traits(
        ident, lambda _current: wanted, project_id=project_id(), if_match=if_match()
    )
    return common.empty_response(204)


@bp.route("/v1/runbooks/<ident>/traits/<trait>", methods=["PUT"])
def add_runbook_trait(ident: str, trait: str) -> Response:
    _traits_gate()
    common.validate(trait, TRAIT, "trait")
    if common.raw_body().strip():
        raise common.bad_request("No body should be provided when adding a trait")

    def add(current: list[str]) -> list[str]:
        return current if trait in current else [*current, trait]

    service().runbooks.set_runbook_traits(ident, add, project_id=project_id(), if_match=if_match())
    return common.empty_response(204, [common.location("runbooks", ident, "traits", trait)])


@bp.route("/v1/runbooks/<ident>/traits/<trait>", methods=["DELETE"])
def remove_runbook_trait(ident: str, trait: str) -> Response:
    _traits_gate()

    def remove(current: list[str]) -> list[str]:
        return [t for t in current if t != trait]

    service().runbooks.set_runbook_traits(ident, remove, project_id=project_id(), if_match=if_match())
    return common.empty_response(204)


@bp.route("/v1/runbooks/<ident>/traits", methods=["DELETE"])
def remove_runbook_traits(ident: str) -> Response:
    _traits_gate()
    service().runbooks.set_runbook_traits(
        ident, lambda _current: [], project_id=project_id(), if_match=if_match()
    )
    return common.empty_response(204)
