"""Errors raised by apimw and the one place that renders HTTP error bodies.

Hierarchy::

    ApimwError                 base of everything apimw raises on purpose
    ├── ConfigError            bad middleware configuration (raised at construction / pipeline load)
    │   └── MissingExtraError  an optional library is not installed (also an ImportError)
    ├── StoreError             a replay store backend is unreachable or misbehaved
    ├── VersionParseError      a microversion string is malformed (also a ValueError-free type)
    └── HTTPProblem            an HTTP error answer: status, stable code, title, detail

Error bodies come in *profiles*, selectable per deployment:

``ironic``
    Ironic's envelope, which python-ironicclient and openstacksdk both parse::

        {"error_message": "{\"code\": 406, \"title\": \"Not Acceptable\", \"faultcode\": \"Client\",
                            \"faultstring\": ..., \"description\": ..., \"debuginfo\": null}",
         "errors": [ <the api-sig entry below> ]}

    The ``errors`` list rides along so that the stable ``code`` is in the same
    place (``body["errors"][0]["code"]``) in every profile; neither client reads it.

``api-sig``
    The OpenStack API-SIG errors guideline: ``{"errors": [{"status", "code", "title",
    "detail", "request_id", ...extra}]}``.

Python's ``TypeError``/``ValueError`` are never mapped to HTTP statuses implicitly:
only an :class:`HTTPProblem` becomes an error response.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from _typeshed import OptExcInfo
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = [
    "ENVIRON_MIDDLEWARE_ANSWER",
    "ENVIRON_PROFILE",
    "PROFILES",
    "ApimwError",
    "ConfigError",
    "HTTPProblem",
    "MissingExtraError",
    "StoreError",
    "VersionParseError",
    "check_profile",
    "explain_missing",
    "flask_problem_handler",
    "problem_answer",
    "render_problem",
    "respond_with_problem",
    "status_line",
]

PROFILES: Final = ("ironic", "api-sig")
#: Set by the outermost apimw middleware so the inner ones render alike.
ENVIRON_PROFILE: Final = "apimw.error_profile"
#: Where oslo.middleware's request_id middleware leaves the request id.
ENVIRON_REQUEST_ID: Final = "openstack.request_id"
#: Set (to the problem's ``code``) in the WSGI environ or ASGI scope by :func:`problem_answer`
#: -- so by :func:`respond_with_problem` and every apimw middleware's own error answer -- when
#: apimw renders an :class:`HTTPProblem` as the request's answer.  Such an answer is a refusal
#: made before (or instead of) the app's execution: the idempotency middleware never stores it
#: as a token's answer and releases the claim, so a corrected retry with the same token runs.
#: A middleware that copies the environ or scope for the layer inside must copy the key back.
ENVIRON_MIDDLEWARE_ANSWER: Final = "apimw.middleware_answer"


class ApimwError(Exception):
    """Base class of every error apimw raises on purpose."""


class ConfigError(ApimwError):
    """A middleware option is missing, of the wrong type or out of range."""


class MissingExtraError(ConfigError, ImportError):
    """What was asked for needs an optional library that is not installed.

    The message is one line naming the extra that installs it:
    ``redis:// needs the redis library: pip install 'apimw[redis]'``.
    """


def explain_missing(exc: ImportError, needs: str, *, module: str, library: str, extra: str) -> None:
    """Raise :class:`MissingExtraError` when *exc* is *module* itself not being installed.

    For ``except ImportError as exc: explain_missing(exc, ...); raise``: any other import
    failure (the library is there but broken) is re-raised as it was.
    """
    if (exc.name or "").partition(".")[0] == module:
        raise MissingExtraError(f"{needs} needs the {library} library: pip install 'apimw[{extra}]'") from exc


class StoreError(ApimwError):
    """A replay store backend could not be reached or answered nonsense."""


class VersionParseError(ApimwError):
    """A microversion string does not match ``^([1-9][0-9]*)\\.(0|[1-9][0-9]*)$``."""


class HTTPProblem(ApimwError):
    """An error answer: raise it from app code below an apimw middleware, or render it.

    ``code`` is stable and machine readable (``microversion.unsupported``);
    ``extra`` adds fields to the API-SIG entry (``min_version``, ``required_version``...);
    ``headers`` are added to the response.
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        title: str | None = None,
        headers: Sequence[tuple[str, str]] = (),
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase
        self.headers = list(headers)
        self.extra = dict(extra or {})

    def __repr__(self) -> str:
        return f"HTTPProblem({self.status}, {self.code!r}, {self.detail!r})"


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ConfigError(f"error profile must be one of {', '.join(PROFILES)}; got {profile!r}")
    return profile


_STATUS_LINES: dict[int, str] = {s.value: f"{s.value} {s.phrase}" for s in HTTPStatus}


def status_line(status: int) -> str:
    """``406`` -> ``"406 Not Acceptable"``."""
    try:
        return _STATUS_LINES[status]
    except KeyError:
        return f"{status} Unknown"


def _api_sig_entry(problem: HTTPProblem, request_id: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "status": problem.status,
        "code": problem.code,
        "title": problem.title,
        "detail": problem.detail,
        "request_id": request_id,
    }
    entry.update(problem.extra)
    return entry


def render_problem(
    problem: HTTPProblem, *, profile: str = "api-sig", request_id: str | None = None
) -> tuple[str, list[tuple[str, str]], bytes]:
    """Return ``(status line, headers, body)`` for *problem* in *profile*."""
    entry = _api_sig_entry(problem, request_id)
    doc: dict[str, Any]
    if profile == "ironic":
        # Ironic has two inner shapes: its controllers' fault (faultcode, faultstring,
        # debuginfo) and its router's / version check's (code, title, description).
        # One superset serves the readers of either.
        inner = {
            "code": problem.status,
            "title": problem.title,
            "faultcode": "Server" if problem.status >= 500 else "Client",
            "faultstring": problem.detail,
            "description": problem.detail,
            "debuginfo": None,
        }
        doc = {"error_message": json.dumps(inner), "errors": [entry]}
    else:
        doc = {"errors": [entry]}
    body = json.dumps(doc).encode("utf-8")
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
        *problem.headers,
    ]
    return status_line(problem.status), headers, body


def respond_with_problem(
    environ: WSGIEnvironment,
    start_response: StartResponse,
    problem: HTTPProblem,
    *,
    profile: str | None = None,
    extra_headers: Iterable[tuple[str, str]] = (),
    exc_info: OptExcInfo | None = None,
) -> list[bytes]:
    """Answer the WSGI request with *problem*.

    The profile is *profile*, else the one an outer apimw middleware recorded in
    the environ, else ``api-sig``.  HEAD requests get the headers without a body.

    Pass *exc_info* only when *start_response* was already called for this request
    (the app started its answer, then raised): PEP 3333 needs it to replace the
    stored headers, and a server that already sent them re-raises it.  A problem
    rendered before anything was started is an answer, not an error: with
    *exc_info*, webob's ``get_response`` and werkzeug's test client (and so every
    webob middleware outside this one) would re-raise it instead of answering.
    """
    status, headers, body = problem_answer(
        environ, problem, method=environ.get("REQUEST_METHOD"), profile=profile, extra_headers=extra_headers
    )
    if exc_info is None:
        start_response(status, headers)
    else:
        start_response(status, headers, exc_info)
    return [body] if body else []


def problem_answer(
    request: MutableMapping[str, Any],
    problem: HTTPProblem,
    *,
    method: str | None,
    profile: str | None = None,
    extra_headers: Iterable[tuple[str, str]] = (),
) -> tuple[str, list[tuple[str, str]], bytes]:
    """``(status line, headers, body)`` answering a request with *problem*, for any protocol.

    *request* is the WSGI environ or the ASGI scope (the keys an outer apimw middleware
    left there are the same).  The profile is *profile*, else the one an outer apimw
    middleware recorded, else ``api-sig``.  A ``HEAD`` answer has the headers and no body.
    The problem's code is left in *request* under :data:`ENVIRON_MIDDLEWARE_ANSWER`.
    """
    request[ENVIRON_MIDDLEWARE_ANSWER] = problem.code
    chosen = profile or request.get(ENVIRON_PROFILE) or "api-sig"
    request_id = request.get(ENVIRON_REQUEST_ID)
    status, headers, body = render_problem(problem, profile=chosen, request_id=request_id)
    headers.extend(extra_headers)
    return status, headers, b"" if method == "HEAD" else body


def flask_problem_handler(problem: HTTPProblem) -> Any:
    """Flask error handler rendering an :class:`HTTPProblem` raised by a view.

    Registered by the apimw Flask wrappers, so gates raised in views become the
    same error bodies as anywhere else instead of Flask's 500.
    """
    from flask import request  # extra "flask": apimw.errors imports without it

    environ = request.environ
    status, headers, body = render_problem(
        problem,
        profile=environ.get(ENVIRON_PROFILE) or "api-sig",
        request_id=environ.get(ENVIRON_REQUEST_ID),
    )
    return body, int(status.split(" ", 1)[0]), headers
