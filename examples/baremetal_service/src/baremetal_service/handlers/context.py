"""Per-request accessors: the service facade, the caller's project, the If-Match etags."""

from __future__ import annotations

from typing import Any, Final

from flask import current_app, request

from apimw.etag import ENVIRON_IF_MATCH
from apimw.idempotency import ClientToken, client_token
from baremetal_service.handlers import serialize
from baremetal_service.handlers.noauth import ENVIRON_PROJECT

SERVICE_KEY: Final = "BAREMETAL_SERVICE"


def service() -> Any:
    return current_app.config[SERVICE_KEY]


def project_id() -> str | None:
    value = request.environ.get(ENVIRON_PROJECT)
    return value if isinstance(value, str) and value else None


def if_match() -> Any:
    """The If-Match etags the etag middleware parsed (``None`` when absent; a list of etags or "*")."""
    return request.environ.get(ENVIRON_IF_MATCH)


def token() -> ClientToken | None:
    """The request's X-Client-Token as the idempotency middleware saw it (scope, fingerprint)."""
    return client_token(request.environ)


def node_scope(node_ident: str) -> dict[str, Any]:
    """The list filter of a node's sub-collection (its ports, portgroups, volume connectors...):
    the node's uuid; 404 when the caller cannot see the node."""
    node = service().get_node(node_ident, project_id=project_id())
    return {"node": serialize.get(node, "uuid")}
