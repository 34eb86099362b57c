"""``noauth``: trust the ``X-Project-Id`` request header as the caller's project.

The development default.  In production put keystonemiddleware's ``auth_token``
in front instead: it validates the token and sets the same ``X-Project-Id``
header from it (and removes any value the client sent), so this middleware
then reads a trustworthy value.  The project lands in
``environ["baremetal.project_id"]``; the API scopes every node, port and portgroup
read and write to it (a project sees the nodes it owns or leases; a node it creates
is owned by it).  A request **without** a project is unscoped, like an admin:
fine for a single-tenant lab, which is why production replaces noauth.  (Behind
Keystone a system-scoped token has no project either: it sees every node, as on
Ironic, while its roles decide what it may do, :mod:`baremetal_service.handlers.authorize`.)

One project per request, read once: ``X-Project-Id``, else the legacy
``X-Tenant-Id`` alias (oslo.context's order; keystonemiddleware sets both to
the same value).  The chosen value is written back to **both** headers (or both
are removed when there is none), so the idempotency middleware's replay scope,
which reads those headers, is always the project the data is scoped to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from apimw.errors import ConfigError, HTTPProblem, respond_with_problem
from apimw.idempotency import ENVIRON_PROJECT_ID, ENVIRON_TENANT_ID

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

ENVIRON_PROJECT: Final = "baremetal.project_id"
_HEADER_ENVIRON: Final = ENVIRON_PROJECT_ID
#: The legacy alias of X-Project-Id (read when X-Project-Id is absent or empty).
_TENANT_ENVIRON: Final = ENVIRON_TENANT_ID
_PROJECT_RE: Final = re.compile(r"^[A-Za-z0-9_\-.:@]{1,255}\Z")


#: The replay scope of a system-scoped token (keystonemiddleware's ``OpenStack-System-Scope: all``): one
#: tenant of its own, never every project's.  A ``/`` cannot appear in a project id.
SYSTEM_SCOPE: Final = "system/all"
_SYSTEM_ENVIRON: Final = "HTTP_OPENSTACK_SYSTEM_SCOPE"
_IDENTITY_STATUS_ENVIRON: Final = "HTTP_X_IDENTITY_STATUS"


def tenant_scope(environ: Mapping[str, Any]) -> str | None:
    """The idempotency middleware's scope (``scope = baremetal_service.handlers.noauth:tenant_scope``):
    the caller's project, else :data:`SYSTEM_SCOPE` for a system-scoped token, else ``None``.

    A request auth_token marked unverified (``X-Identity-Status`` other than ``Confirmed``)
    has none: its headers are not an identity.
    """
    status = environ.get(_IDENTITY_STATUS_ENVIRON)
    if status is not None and status != "Confirmed":
        return None
    project = environ.get(_HEADER_ENVIRON) or environ.get(_TENANT_ENVIRON)
    if isinstance(project, str) and project:
        return project
    if environ.get(_SYSTEM_ENVIRON) == "all":
        return SYSTEM_SCOPE
    return None


class NoAuthMiddleware:
    """Read the caller's project once (``X-Project-Id``, else ``X-Tenant-Id``); refuse a malformed one.

    The project goes to ``environ["baremetal.project_id"]`` (the data scope) and back to
    both project headers (the replay scope); without one, all three are removed.
    """

    def __init__(self, app: WSGIApplication, *, header_environ: str = _HEADER_ENVIRON) -> None:
        if not header_environ.startswith("HTTP_"):
            raise ConfigError(f"header_environ must be a CGI header key (HTTP_...), got {header_environ!r}")
        self.app = app
        self.header_environ = header_environ
        self._scope_headers = tuple(dict.fromkeys((header_environ, _HEADER_ENVIRON, _TENANT_ENVIRON)))

    def project_of(self, environ: WSGIEnvironment) -> tuple[str | None, str]:
        """``(project or None, header it came from)``; the first non-blank of the headers."""
        for key in (self.header_environ, _TENANT_ENVIRON):
            value = environ.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip(), key
        return None, self.header_environ

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        value, source = self.project_of(environ)
        if value is not None and not _PROJECT_RE.match(value):
            header = "X-Tenant-Id" if source == _TENANT_ENVIRON else "X-Project-Id"
            problem = HTTPProblem(400, "auth.invalid-project", f"The {header} header is malformed.")
            return respond_with_problem(environ, start_response, problem, profile="ironic")
        if value is None:
            environ.pop(ENVIRON_PROJECT, None)
            for key in self._scope_headers:
                environ.pop(key, None)
        else:
            environ[ENVIRON_PROJECT] = value
            for key in self._scope_headers:
                environ[key] = value
        return self.app(environ, start_response)


def filter_factory(global_conf: Mapping[str, Any], **local_conf: str) -> Any:
    """paste.deploy factory (``paste.filter_factory = baremetal_service.handlers.noauth:filter_factory``)."""
    kwargs = {}
    if "header_environ" in local_conf:
        kwargs["header_environ"] = local_conf["header_environ"]

    def _filter(app: WSGIApplication) -> WSGIApplication:
        return NoAuthMiddleware(app, **kwargs)

    return _filter
