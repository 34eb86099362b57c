"""A thin adapter for webob applications (Nova, Placement...): gates and ``req`` helpers.

The middlewares stay plain WSGI; this module only reads and writes the environ keys they
document, from a ``webob.Request``, and renders :class:`~apimw.errors.HTTPProblem` as a
``webob.Response`` in the deployment's error profile::

    from webob.dec import wsgify
    from apimw import webob as apimw_webob

    @wsgify
    @apimw_webob.version_gate("1.5", what="Node history")
    def history(req):
        ...

    @wsgify
    @apimw_webob.handle_problems        # StaleEtag, ResourceGone, gates -> their 4xx
    def patch_node(req):
        row = update_if_match(..., if_match=apimw_webob.if_match(req), ...)
        apimw_webob.set_etag(req, row["etag"])
        ...

The gates are :mod:`apimw.microversion`'s (:class:`~apimw.microversion.VersionGate`); the
error bodies are :func:`apimw.errors.render_problem`'s.  Needs the ``webob`` extra
(``pip install apimw[webob]``); ``import apimw`` never imports this module.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

from apimw._microversion_type import Version
from apimw.errors import ENVIRON_PROFILE, ENVIRON_REQUEST_ID, HTTPProblem, explain_missing, render_problem
from apimw.etag import (
    ETagGenerator,
    IfMatch,
    IfNoneMatch,
    etags_enabled,
    generator_from_environ,
    set_response_etag,
)
from apimw.etag import if_match as _if_match
from apimw.etag import if_none_match as _if_none_match
from apimw.etag import mark_enforced as _mark_enforced
from apimw.idempotency import ENVIRON_REPLAYED, ENVIRON_STATUS
from apimw.microversion import VersionGate
from apimw.microversion import served_version as _served_version

try:
    import webob
except ImportError as exc:  # one line naming the extra
    explain_missing(exc, "apimw.webob", module="webob", library="WebOb", extra="webob")
    raise

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "Replay",
    "check_version",
    "etag_generator",
    "etags_served",
    "handle_problems",
    "if_match",
    "if_none_match",
    "mark_enforced",
    "problem_response",
    "replay",
    "served_version",
    "set_etag",
    "version_gate",
]

_F = TypeVar("_F", bound=Callable[..., Any])
_DEFAULT_PROFILE: Final = "api-sig"


# -- errors --------------------------------------------------------------------------------


def problem_response(req: webob.Request, problem: HTTPProblem) -> webob.Response:
    """*problem* as a ``webob.Response``: the body apimw's middlewares would send.

    The profile is the one the outermost apimw middleware recorded in the environ
    (``ironic`` or ``api-sig``), else ``api-sig``; the request id is oslo's, if any.
    """
    environ = req.environ
    status, headers, body = render_problem(
        problem,
        profile=environ.get(ENVIRON_PROFILE) or _DEFAULT_PROFILE,
        request_id=environ.get(ENVIRON_REQUEST_ID),
    )
    # webob drops the body of a HEAD answer itself and keeps Content-Length.
    return webob.Response(status=status, headerlist=headers, app_iter=[body])


def _request_of(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> webob.Request:
    for value in (*args, *kwargs.values()):
        if isinstance(value, webob.Request):
            return value
    raise TypeError("apimw.webob: the decorated view takes no webob.Request argument")


def handle_problems(view: _F) -> _F:
    """Decorate a ``wsgify`` view: an :class:`HTTPProblem` it raises becomes its response.

    Without it the problem still reaches the client correctly when an apimw middleware
    sits outside the app (each one renders what the app raises); with it the app answers
    by itself, so webob middlewares in between see a response, not an exception.
    """

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return view(*args, **kwargs)
        except HTTPProblem as problem:
            return problem_response(_request_of(args, kwargs), problem)

    return wrapper  # type: ignore[return-value]


# -- microversions ---------------------------------------------------------------------------


def served_version(req: webob.Request) -> Version | None:
    """The microversion this request is served at (``None`` without the middleware)."""
    return _served_version(req.environ)


def check_version(
    req: webob.Request,
    since: str | Version | None,
    until: str | Version | None = None,
    *,
    what: str,
    status: int = 406,
) -> None:
    """Raise the gate's :class:`HTTPProblem` (``microversion.feature-unavailable``) unless the
    request's version is within ``[since, until]`` -- for a field or parameter in a view."""
    VersionGate(since, until, what=what, status=status).check(req.environ)


def version_gate(
    since: str | Version | None | VersionGate,
    until: str | Version | None = None,
    *,
    what: str | None = None,
    status: int = 406,
) -> Callable[[_F], _F]:
    """Decorator for a ``wsgify`` view (function or method) that exists from *since* (until
    *until*): other versions get the gate's error response (406, or *status*: 404 for a
    route), rendered like :func:`handle_problems`.  Bounds are parsed once, here.

    Pass a :class:`~apimw.microversion.VersionGate` instead of bounds to share one.
    """
    if isinstance(since, VersionGate):
        gate = since
    else:
        if what is None:
            raise TypeError("version_gate() needs what= (named in the error) unless given a VersionGate")
        gate = VersionGate(since, until, what=what, status=status)

    def decorator(view: _F) -> _F:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            req = _request_of(args, kwargs)
            try:
                gate.check(req.environ)
            except HTTPProblem as problem:
                return problem_response(req, problem)
            return view(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorator


# -- etags -----------------------------------------------------------------------------------


def if_match(req: webob.Request) -> IfMatch | None:
    """The If-Match the etag middleware parsed for this write (``None`` if absent)."""
    return _if_match(req.environ)


def if_none_match(req: webob.Request) -> IfNoneMatch | None:
    """The If-None-Match of a write (only with the middleware's ``if_none_match_on_writes``)."""
    return _if_none_match(req.environ)


def mark_enforced(req: webob.Request) -> None:
    """Acknowledge that the write was conditional on the request's If-Match (fail-closed check)."""
    _mark_enforced(req.environ)


def set_etag(req: webob.Request, etag: str | None) -> None:
    """The wire-form etag (``W/"..."``) of the resource in this response: the middleware sends
    it as the ``ETag`` header at the versions that serve etags."""
    set_response_etag(req.environ, etag)


def etags_served(req: webob.Request) -> bool:
    """Whether this request's version serves etags (so include the body ``etag`` field)."""
    return etags_enabled(req.environ)


def etag_generator(req: webob.Request) -> ETagGenerator:
    """The etag middleware's configured generator (:class:`~apimw.errors.ConfigError` if none)."""
    return generator_from_environ(req.environ)


# -- idempotent replay ------------------------------------------------------------------------


@dataclass(frozen=True)
class Replay:
    """What the idempotency middleware recorded for this request.

    ``status``: ``"claimed"`` (a token was sent; the app runs once under its claim and its
    answer is stored for retries), ``"unprotected"`` (a token was sent but the store was
    down and ``on_store_error = fail_open``), or ``None`` (no token, or no middleware).
    ``replayed``: the answer is a stored one -- only a webob middleware *outside* the
    idempotency middleware sees ``True`` (after ``req.get_response``): the app never
    runs for a replay.
    """

    status: str | None
    replayed: bool

    @property
    def protected(self) -> bool:
        """The app runs at most once for this token (it may skip its own dedup)."""
        return self.status == "claimed"


def replay(req: webob.Request) -> Replay:
    """The idempotency middleware's view of this request (see :class:`Replay`)."""
    environ = req.environ
    return Replay(environ.get(ENVIRON_STATUS), environ.get(ENVIRON_REPLAYED) is True)
