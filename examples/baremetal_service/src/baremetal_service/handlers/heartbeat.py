"""``POST /v1/heartbeat/{node}`` and ``POST /v1/heartbeat`` (Ironic 1.22): an agent's heartbeat.

This service runs no deploy agent, so no node holds an agent token and every heartbeat that
gets past the checks is refused as Ironic refuses a wrong token.  The checks are Ironic's, in
its words: the route from 1.22 (404 below), the fields each version knows (``agent_version``
1.36, ``agent_token`` 1.62, ``agent_verify_ca`` 1.68, ``agent_status`` and
``agent_status_message`` 1.72), the node, the agent's version and its token.
"""

from __future__ import annotations

from typing import Any, Final

from flask import Blueprint, Response, request

from apimw import Version, VersionGate
from baremetal_service import versions
from baremetal_service.handlers import common
from baremetal_service.handlers.context import project_id, service
from baremetal_service.schemas import object_schema

bp = Blueprint("heartbeat", __name__)

#: The route, from Ironic's lookup/heartbeat version.
HEARTBEAT: Final = VersionGate.route(
    versions.LOOKUP_HEARTBEAT, what="Heartbeat", detail="The resource could not be found."
)
#: Each field a heartbeat may carry and the version that knows it.
FIELDS: Final[dict[str, Version]] = {
    "callback_url": versions.LOOKUP_HEARTBEAT,
    "agent_version": Version(1, 36),
    "agent_token": Version(1, 62),
    "agent_verify_ca": Version(1, 68),
    "agent_status": Version(1, 72),
    "agent_status_message": Version(1, 72),
}
_TEXT: Final = {"type": "string", "maxLength": 4096}
BODY: Final = object_schema(
    {"node_ident": {"type": "string", "maxLength": 255}, **dict.fromkeys(FIELDS, _TEXT)}, additional=True
)


@bp.route("/v1/heartbeat/<node_ident>", methods=["POST"])
def heartbeat_node(node_ident: str) -> Response:
    HEARTBEAT.check(request.environ)
    return _heartbeat(node_ident, _body(frozenset(FIELDS)))


@bp.route("/v1/heartbeat", methods=["POST"])
def heartbeat() -> Response:
    HEARTBEAT.check(request.environ)
    body = _body(frozenset(FIELDS) | {"node_ident"})
    if not isinstance(body.get("node_ident"), str):
        raise common.bad_request("Missing mandatory parameter: node_ident", "request.missing-parameter")
    return _heartbeat(body["node_ident"], body)


def _body(allowed: frozenset[str]) -> dict[str, Any]:
    body = common.json_body()
    common.validate(body, BODY, "heartbeat")
    unexpected = [name for name in body if name not in allowed]
    if unexpected:
        raise common.bad_request(
            f"Unexpected arguments: {', '.join(common.shorten(n) for n in unexpected)}",
            "request.unexpected-arguments",
        )
    served = common.api_version()
    for name in body:
        if name in FIELDS and served < FIELDS[name]:
            raise common.bad_request(f'Field "{name}" not recognised', "request.unknown-field")
    if "callback_url" not in body:
        raise common.bad_request("Missing mandatory parameter: callback_url", "request.missing-parameter")
    return dict(body)


def _heartbeat(node_ident: str, body: dict[str, Any]) -> Response:
    service().get_node(node_ident, project_id=project_id())
    if not body.get("agent_version"):
        raise common.bad_request(
            "Agent did not transmit a version, and a version is required. "
            "Please update the agent being used.",
            "baremetal.agent-version-missing",
        )
    if not body.get("agent_token"):
        raise common.bad_request(
            "Agent token is required for heartbeat processing.", "baremetal.agent-token-missing"
        )
    raise common.bad_request("Invalid or missing agent token received.", "baremetal.agent-token-invalid")
