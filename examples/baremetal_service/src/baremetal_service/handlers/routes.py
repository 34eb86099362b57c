"""The HTTP API of the bare-metal service: a Flask app speaking Ironic's v1 wire format.

``create_flask_app(service)`` returns the bare app (no middlewares, no OpenAPI route: the
deployment adds ``GET /v1/openapi.json`` with :func:`baremetal_service.openapi.install`,
since the document is built from these handlers); the
middleware stack is assembled by :mod:`baremetal_service.deploy` (in code) or by
``api-paste.ini`` (paste.deploy).  Every error leaves as Ironic's envelope
through :func:`apimw.errors.render_problem`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import sqlalchemy as sa
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from apimw.errors import HTTPProblem
from baremetal_service import settings
from baremetal_service.db.engine import is_unavailable
from baremetal_service.exceptions import DatabaseUnavailable
from baremetal_service.handlers import (
    allocations,
    conductors,
    drivers,
    heartbeat,
    inspection_rules,
    node_features,
    node_history,
    node_management,
    nodes,
    paths,
    portgroups,
    ports,
    resource_classes,
    root,
    runbooks,
    volume,
)
from baremetal_service.handlers.common import (
    BODY_LIMIT_KEY,
    MAX_BODY_BYTES,
    PUBLIC_ENDPOINT_KEY,
    base_url,
    body_too_large,
    problem_response,
)
from baremetal_service.handlers.context import SERVICE_KEY
from baremetal_service.handlers.resources import blueprints

LOG = logging.getLogger(__name__)

__all__ = ["create_flask_app"]


#: The handler modules whose blueprints are registered before the generic routes of the
#: declared resources (:func:`.resources.blueprints`), then those registered after them.
_HANDLERS: Final = (root, nodes, node_features, ports, portgroups, drivers, resource_classes)
_LATER_HANDLERS: Final = (
    volume, inspection_rules, allocations, conductors, runbooks, node_management, node_history, heartbeat,
)  # fmt: skip


def create_flask_app(
    service: Any,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    public_endpoint: str | None = settings.PUBLIC_ENDPOINT,
    authorizer: Callable[[], None] | None = None,
) -> Flask:
    """The Flask app serving the v1 API from *service* (the domain facade).

    *max_body_bytes*: the largest request body read (413 above it, checked against
    Content-Length before reading and while reading a chunked body).
    *public_endpoint*: the URL links and ``Location`` headers start with (Ironic's
    ``public_endpoint``, :func:`baremetal_service.settings.public_endpoint` checks it);
    ``None``: the request's own scheme, Host header and script name, as Ironic does.
    *authorizer*: called before each request's handler to apply the access rules
    (:class:`baremetal_service.handlers.authorize.Authorizer`); ``None``: every caller is
    an operator of the whole deployment (``noauth``, ``http_basic``), as on Ironic.
    """

    if max_body_bytes <= 0:
        raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes!r}")
    app = Flask("baremetal_service.handlers.routes")
    app.config[SERVICE_KEY] = service
    app.config[BODY_LIMIT_KEY] = max_body_bytes
    app.config[PUBLIC_ENDPOINT_KEY] = settings.public_endpoint(public_endpoint)
    # one byte more, so that a chunked body over the limit is told from one of exactly the limit
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes + 1
    app.url_map.strict_slashes = False
    for module in _HANDLERS:
        app.register_blueprint(module.bp)
    for generated in blueprints():  # declared resources served by the generic routes alone
        app.register_blueprint(generated)
    for module in _LATER_HANDLERS:
        app.register_blueprint(module.bp)
    # Ironic's paths without a version, .json suffixes and console alias, before routing
    app.wsgi_app = paths.ironic_paths(app.wsgi_app)  # type: ignore[method-assign]

    @app.before_request
    def _acceptable() -> None:
        # The base of links and Location headers, before anything is written: a Host
        # header that is not a host is refused here, never after a commit.
        base_url()
        # Every answer is JSON: a client that accepts only something else gets a 406 up front.
        accept = request.environ.get("HTTP_ACCEPT")
        if (
            accept
            and "json" not in accept
            and "*/*" not in accept
            and (not request.accept_mimetypes.accept_json)
        ):
            raise HTTPProblem(
                406, "request.not-acceptable", f"Only application/json is available, not {accept}."
            )

    if authorizer is not None:
        app.before_request(authorizer)

    @app.errorhandler(HTTPProblem)
    def _problem(problem: HTTPProblem) -> Response:
        return problem_response(problem)

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Response:
        status = exc.code or 500
        code = {404: "request.not-found", 405: "request.method-not-allowed"}.get(status, "request.error")
        detail = exc.description or ""
        if status == 404:
            detail = "The resource could not be found."
        elif status == 413:  # werkzeug's, from Content-Length
            return problem_response(body_too_large(app.config[BODY_LIMIT_KEY]))
        headers = []
        if status == 405 and exc.get_response().headers.get("Allow"):
            headers.append(("Allow", exc.get_response().headers["Allow"]))
        return problem_response(HTTPProblem(status, code, detail, headers=headers))

    @app.errorhandler(sa.exc.DBAPIError)
    @app.errorhandler(sa.exc.TimeoutError)
    def _database(exc: sa.exc.SQLAlchemyError) -> Response:
        if not is_unavailable(exc):
            return _crash(exc)
        # one line, no traceback: an outage is not a bug (and would log one per request)
        LOG.warning("database unavailable: %s", type(getattr(exc, "orig", None) or exc).__name__)
        return problem_response(DatabaseUnavailable())

    @app.errorhandler(Exception)
    def _crash(exc: Exception) -> Response:
        LOG.exception("unhandled error")
        return problem_response(HTTPProblem(500, "server.error", "An internal error occurred."))

    return app
