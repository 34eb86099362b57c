"""``noauth``: trust the ``X-Project-Id`` request header as the caller's project.

The development default.  In production put keystonemiddleware's ``auth_token``
in front instead: it validates the token and sets the same ``X-Project-Id``
header from it (and removes any value the client sent), so this middleware
then reads a trustworthy value.  The project lands in
``environ["baremetal.project_id"]``; the API scopes every node, port and portgroup
read and write to it (a project sees the nodes it owns or leases; a node it creates
is owned by it).  A request **without** ``X-Project-Id`` is unscoped, like an admin:
fine for a single-tenant lab, which is why production replaces noauth.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from apimw.errors import ConfigError, HTTPProblem, respond_with_problem

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

ENVIRON_PROJECT: Final = "baremetal.project_id"
_HEADER_ENVIRON: Final = "HTTP_X_PROJECT_ID"
_PROJECT_RE: Final = re.compile(r"^[A-Za-z0-9_\-.:@]{1,255}$")


class NoAuthMiddleware:
    """Copy a well-formed ``X-Project-Id`` into the environ; refuse a malformed one (400)."""

    def __init__(self, app: WSGIApplication, *, header_environ: str = _HEADER_ENVIRON) -> None:
        if not header_environ.startswith("HTTP_"):
            raise ConfigError(f"header_environ must be a CGI header key (HTTP_...), got {header_environ!r}")
        self.app = app
        self.header_environ = header_environ

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        value = environ.get(self.header_environ)
        if value:
            value = value.strip()
            if not _PROJECT_RE.match(value):
                problem = HTTPProblem(400, "auth.invalid-project", "The X-Project-Id header is malformed.")
                return respond_with_problem(environ, start_response, problem, profile="ironic")
            environ[ENVIRON_PROJECT] = value
        else:
            environ.pop(ENVIRON_PROJECT, None)
        return self.app(environ, start_response)


def filter_factory(global_conf: Mapping[str, Any], **local_conf: str) -> Any:
    """paste.deploy factory (``paste.filter_factory = baremetal_service.api.noauth:filter_factory``)."""
    kwargs = {}
    if "header_environ" in local_conf:
        kwargs["header_environ"] = local_conf["header_environ"]

    def _filter(app: WSGIApplication) -> WSGIApplication:
        return NoAuthMiddleware(app, **kwargs)

    return _filter
