"""Resource objects with etags and safe create retries, on top of :class:`~apimw.client.VersionedSession`.

The client half of the ironic-etag spec ("Client (CLI) impact") and of the
nova idempotency client-token spec, for any OpenStack-style service::

    client = ResourceClient(session)                       # a VersionedSession
    nodes = client.manager("/v1/nodes", "nodes", kind="node", etag_version="1.116")
    node = nodes.get("n1")                                 # node.etag
    node = node.update([{"op": "add", "path": "/extra/a", "value": 1}], etag=True)
    node = nodes.create({"driver": "fake-hardware"})       # X-Client-Token, retried safely

* ``etag=True`` sends ``If-Match`` with the etag the resource was read with.
  Below the service's etag microversion that is a client-side
  :class:`EtagUnsupported` (never a silent no-op); a resource without an etag at
  a version that has them is :class:`MissingEtag`.
* A 412 raises :class:`EtagConflict` with the local and the server's current
  representation and a field-level diff; ``retries=N`` re-fetches and re-applies
  the same JSON patch (at most *N* times) when it still applies cleanly: it
  applies (``jsonpatch``) and touches no field the other writer changed.
* A create carries a client token made once per logical create and reused by
  every retry; connection errors, read timeouts and 502/503/504 are retried with
  backoff, a 409 "in flight" waits per ``Retry-After``.  A request that is
  neither safe (GET/HEAD) nor carries a token the server replays is never retried.

Exceptions (all :class:`~apimw.errors.ApimwError`)::

    ClientError                  .status .code .response .client_token
    ├── HTTPError                a non-2xx answer: .status, .code (errors[0].code), .detail
    │   ├── NotFound             404
    │   ├── Conflict             409
    │   └── PreconditionFailed   412
    │       └── EtagConflict     412 explained: .local .remote .diff .patch .attempts
    ├── EtagUnsupported          etags asked for below the etag microversion (client side)
    ├── MissingEtag              no etag on a resource at a version that has etags
    ├── FeatureUnsupported       a resource type newer than the session's microversion
    └── ConnectionFailed         no answer (connection error, read timeout), after retries
"""

from __future__ import annotations

import copy
import email.utils
import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar
from urllib.parse import urlsplit

from apimw._microversion_type import Version, parse_version
from apimw.client import ServerRange, UnsupportedVersion, VersionedSession, endpoint_key
from apimw.errors import ApimwError, ConfigError, VersionParseError, explain_missing

try:
    import jsonpatch
    import requests
except ImportError as exc:  # one line naming the extra
    explain_missing(exc, "apimw.client_resources", module="requests", library="requests", extra="client")
    explain_missing(exc, "apimw.client_resources", module="jsonpatch", library="jsonpatch", extra="client")
    raise

__all__ = [
    "AUTO",
    "MISSING",
    "Change",
    "ClientError",
    "Conflict",
    "ConnectionFailed",
    "EtagConflict",
    "EtagUnsupported",
    "FeatureUnsupported",
    "HTTPError",
    "MissingEtag",
    "NotFound",
    "PreconditionFailed",
    "Resource",
    "ResourceClient",
    "ResourceManager",
    "RetryPolicy",
    "UnsupportedVersion",
    "diff_documents",
    "error_from_response",
    "format_diff",
    "new_client_token",
    "patch_conflicts",
]

LOG = logging.getLogger(__name__)

CLIENT_TOKEN_HEADER: Final = "X-Client-Token"  # noqa: S105 - a header name
IDEMPOTENCY_KEY_HEADER: Final = "Idempotency-Key"
REPLAYED_HEADER: Final = "Idempotent-Replayed"
#: Fields left out of conflict diffs: they change on every write.
DEFAULT_DIFF_IGNORE: Final = ("etag", "updated_at")
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


class _Auto:
    def __repr__(self) -> str:
        return "AUTO"


#: A field absent on one side of a :class:`Change`.
MISSING: Final = _Missing()
#: ``client_token=AUTO`` (the default): a new token per logical create.
AUTO: Final = _Auto()


# -- errors -----------------------------------------------------------------------------


class ClientError(ApimwError):
    """Base of the client layer's errors; ``client_token`` is the create's token, if any
    (retry later with the same token to learn what became of the create)."""

    status: int | None = None

    def __init__(
        self,
        message: str,
        *,
        response: requests.Response | None = None,
        code: str | None = None,
        client_token: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.response = response
        self.code = code
        self.client_token = client_token
        if response is not None:
            self.status = response.status_code


class HTTPError(ClientError):
    """The server answered with an error status; ``detail`` is its message."""

    def __init__(self, message: str, *, detail: str = "", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.detail = detail


class NotFound(HTTPError):
    """404."""


class Conflict(HTTPError):
    """409: a duplicate, a state that forbids the change, a token reused for another request."""


class PreconditionFailed(HTTPError):
    """412: the ``If-Match`` etag is stale."""


@dataclass(frozen=True)
class Change:
    """One field that differs: ``path`` is a JSON Pointer, ``local``/``remote`` may be :data:`MISSING`."""

    path: str
    local: Any
    remote: Any

    def __str__(self) -> str:
        return f"{self.path}: {_show(self.local)} -> {_show(self.remote)}"


class EtagConflict(PreconditionFailed):
    """A 412 explained: the resource changed on the server since it was read.

    ``local`` is the representation the client held, ``remote`` the server's
    current one (``None`` if it was deleted meanwhile), ``diff`` the fields that
    differ (``local -> remote``), ``patch`` the change that was refused and
    ``attempts`` how many times it was sent.
    """

    def __init__(
        self,
        message: str,
        *,
        local: Mapping[str, Any],
        remote: Mapping[str, Any] | None,
        diff: Sequence[Change],
        patch: Sequence[Mapping[str, Any]] | None,
        attempts: int,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.local = dict(local)
        self.remote = dict(remote) if remote is not None else None
        self.diff = list(diff)
        self.patch = list(patch) if patch is not None else None
        self.attempts = attempts


class EtagUnsupported(ClientError):
    """Etags were asked for, but the session's microversion (or the server) has none.

    ``etag_version`` is the first version with etags (``None``: this resource type
    never has them), ``version`` the session's, ``server_max`` the server's maximum.
    """

    def __init__(
        self,
        message: str,
        *,
        etag_version: Version | None,
        version: Version | None,
        server_max: Version | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.etag_version = etag_version
        self.version = version
        self.server_max = server_max


class MissingEtag(ClientError):
    """``etag=True`` on a resource that carries no etag at a version that has them."""


class FeatureUnsupported(ClientError):
    """The resource type needs a newer microversion than the session speaks."""


class ConnectionFailed(ClientError):
    """No answer from the server (connection refused or reset, read timeout), after ``attempts`` tries."""

    def __init__(self, message: str, *, attempts: int, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.attempts = attempts


def _error_text(response: requests.Response) -> tuple[str, str | None]:
    """``(message, code)`` from an Ironic envelope, an API-SIG ``errors`` list or plain text."""
    try:
        body = response.json()
    except ValueError:
        text = (response.text or "").strip()
        return (" ".join(text.split())[:300] or response.reason or ""), None
    message = ""
    code = None
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            first = errors[0]
            code = first.get("code") if isinstance(first.get("code"), str) else None
            message = str(first.get("detail") or first.get("title") or "")
        inner = body.get("error_message")
        if not message and inner is not None:
            if isinstance(inner, str):
                try:
                    inner = json.loads(inner)
                except ValueError:
                    message = inner
            if isinstance(inner, dict):
                message = str(inner.get("faultstring") or inner.get("description")
                              or inner.get("title") or "")
        if not message:
            for key in ("message", "detail", "title"):
                if isinstance(body.get(key), str):
                    message = body[key]
                    break
    return (" ".join(message.split()) or response.reason or ""), code


#: Attribute :meth:`ResourceClient.send` sets on a response it stopped retrying: why it stopped.
_GAVE_UP: Final = "_apimw_gave_up"


def _token_note(client_token: str) -> str:
    """What a message about a request that may have been carried out says of its token."""
    return f"; client token {client_token} (retry with it to learn the outcome)"


def error_from_response(response: requests.Response, *, client_token: str | None = None) -> HTTPError:
    """The :class:`HTTPError` subclass for a non-2xx *response*, with the server's message.

    When the client retried and gave up (the attempts ran out on a 502/503/504, or a 409 "in
    flight" outlasted ``in_flight_timeout``), the message says so and names *client_token*:
    the request may still have been carried out, and the token is how to learn its outcome.
    """
    detail, code = _error_text(response)
    status = response.status_code
    cls: type[HTTPError] = {404: NotFound, 409: Conflict, 412: PreconditionFailed}.get(status, HTTPError)
    method = response.request.method if response.request is not None else ""
    message = f"{status} {response.reason or ''}".strip()
    message = f"{message} ({method} {response.url})"
    if detail:
        message += f": {detail}"
    gave_up = getattr(response, _GAVE_UP, None)
    if gave_up:
        message += f"; {gave_up}"
        if client_token is not None:
            message += _token_note(client_token)
    return cls(message, response=response, code=code, detail=detail, client_token=client_token)


# -- diff and patch ---------------------------------------------------------------------


def _show(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def diff_documents(
    local: Mapping[str, Any], remote: Mapping[str, Any], ignore: Iterable[str] = DEFAULT_DIFF_IGNORE
) -> list[Change]:
    """The fields that differ between two JSON documents, as JSON Pointers, sorted.

    Objects are compared key by key at every depth; any other value (lists
    included) is compared whole.  *ignore* names top-level fields to leave out.
    """
    skipped = set(ignore)
    changes: list[Change] = []

    def walk(prefix: str, a: Any, b: Any, top: bool) -> None:
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for key in sorted(set(a) | set(b), key=str):
                if top and key in skipped:
                    continue
                walk(f"{prefix}/{_escape(str(key))}", a.get(key, MISSING), b.get(key, MISSING), False)
        elif a != b or type(a) is not type(b):
            changes.append(Change(prefix, a, b))

    walk("", local, remote, True)
    return changes


def format_diff(diff: Sequence[Change], limit: int = 10) -> str:
    """``/extra/a: 1 -> 2; /name: "x" -> (absent)`` on one line (at most *limit* fields)."""
    if not diff:
        return "no field differs"
    shown = "; ".join(str(change) for change in diff[:limit])
    if len(diff) > limit:
        shown += f"; ... {len(diff) - limit} more"
    return shown


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/") or a == "" or b == ""


def patch_conflicts(
    patch: Sequence[Mapping[str, Any]], local: Mapping[str, Any], remote: Mapping[str, Any]
) -> str | None:
    """Why *patch*, computed against *local*, cannot be re-applied to *remote*; ``None`` if it can.

    It can when it applies (``jsonpatch``: ``test`` ops hold, paths exist) and none of
    the paths it touches overlaps a field that changed between *local* and *remote*
    (so the other writer's change is kept and ours does not overwrite it).
    """
    changed = [c.path for c in diff_documents(local, remote)]
    for op in patch:
        for key in ("path", "from"):
            target = op.get(key)
            if not isinstance(target, str):
                continue
            for path in changed:
                if _overlaps(target, path):
                    return f"the patch's {op.get('op')} {target} touches {path}, which changed on the server"
    try:
        jsonpatch.apply_patch(copy.deepcopy(dict(remote)), list(patch))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        return f"the patch no longer applies: {exc}"
    return None


def new_client_token() -> str:
    """A fresh client token (32 hex digits; the middleware accepts 1-255 visible ASCII)."""
    return uuid.uuid4().hex


# -- retries ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to retry a request that is safe to repeat.

    ``attempts`` counts every send (1 = never retry); the n-th retry waits
    ``min(backoff * 2**(n-1), max_backoff)`` with +-``jitter`` (a fraction), or
    the server's ``Retry-After`` if longer (capped at ``max_backoff``).  A 409
    "in flight" (a ``Retry-After`` on a 409 to a request with a token) waits per
    ``Retry-After`` until ``in_flight_timeout`` seconds have been spent waiting.
    """

    attempts: int = 4
    backoff: float = 0.5
    max_backoff: float = 8.0
    jitter: float = 0.1
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({502, 503, 504}))
    in_flight_timeout: float = 60.0
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError(f"RetryPolicy.attempts must be >= 1, got {self.attempts}")
        if self.backoff < 0 or self.max_backoff < 0 or self.in_flight_timeout < 0:
            raise ConfigError("RetryPolicy: backoff, max_backoff and in_flight_timeout must be >= 0")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds before retry number *retry* (1-based)."""
        base = min(self.backoff * float(2 ** (retry - 1)), self.max_backoff)
        if self.jitter:
            base *= 1 + random.uniform(-self.jitter, self.jitter)  # noqa: S311 - not security
        if retry_after is not None:
            base = max(base, min(retry_after, self.max_backoff))
        return max(base, 0.0)


#: Never retry (a policy for callers that handle retries themselves).
NO_RETRY: Final = RetryPolicy(attempts=1)


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


# -- client, managers, resources --------------------------------------------------------

R = TypeVar("R", bound="Resource")
R2 = TypeVar("R2", bound="Resource")


def _version(value: str | Version | None, name: str) -> Version | None:
    if value is None or isinstance(value, Version):
        return value
    try:
        return parse_version(value)
    except VersionParseError as exc:
        raise ConfigError(f"{name}: {exc}") from None


class ResourceClient:
    """What every manager of one service shares: the session and the retry rules.

    session
        a :class:`~apimw.client.VersionedSession` (negotiation stays its business).
    retry
        the :class:`RetryPolicy` of safe requests: GETs, and creates with a token the
        server replays.
    token_header
        ``X-Client-Token`` (default) or ``Idempotency-Key`` (sent as an RFC 8941 string).
    replay
        whether the server replays creates by token: ``True``, ``False``, or a function
        of the server's :class:`~apimw.client.ServerRange` (``None`` if unknown).  When it
        says no, tokens are still sent but creates are not retried automatically and a
        warning says so (a retried create could make a second resource).
    etag_default
        what ``etag=None`` means in ``update``/``delete`` (the spec's deprecation period:
        ``False``, no ``If-Match`` unless asked).
    """

    def __init__(
        self,
        session: VersionedSession,
        *,
        retry: RetryPolicy | None = None,
        token_header: str = CLIENT_TOKEN_HEADER,
        replay: bool | Callable[[ServerRange | None], bool] = True,
        etag_default: bool = False,
    ) -> None:
        if token_header.lower() not in (CLIENT_TOKEN_HEADER.lower(), IDEMPOTENCY_KEY_HEADER.lower()):
            raise ConfigError(f"token_header must be X-Client-Token or Idempotency-Key, got {token_header!r}")
        self.session = session
        self.retry = retry if retry is not None else RetryPolicy()
        self.token_header = token_header
        self.replay = replay
        self.etag_default = etag_default
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def manager(self, path: str, key: str, **kwargs: Any) -> ResourceManager[Resource]:
        """A :class:`ResourceManager` of plain :class:`Resource` objects under *path*."""
        return ResourceManager(self, path, key, **kwargs)

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> ResourceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- facts about the server -----------------------------------------------------

    def version(self) -> Version:
        """The microversion requests are sent at (learns the server's range if needed)."""
        return self.session.negotiate()

    def server_max(self) -> Version | None:
        known = self.session.server_range()
        return known.max_version if known is not None else None

    def replay_supported(self) -> bool:
        if callable(self.replay):
            self.session.negotiate()
            return bool(self.replay(self.session.server_range()))
        return bool(self.replay)

    def warn_once(self, what: str, message: str, *args: Any) -> None:
        with self._lock:
            if (self.session.key, what) in self._warned:
                return
            self._warned.add((self.session.key, what))
        LOG.warning(message, *args)

    def token_headers(self, token: str | None) -> dict[str, str]:
        if token is None:
            return {}
        if self.token_header.lower() == IDEMPOTENCY_KEY_HEADER.lower():
            escaped = token.replace("\\", "\\\\").replace('"', '\\"')
            return {IDEMPOTENCY_KEY_HEADER: f'"{escaped}"'}
        return {self.token_header: token}

    # -- sending --------------------------------------------------------------------

    def send(
        self,
        method: str,
        path: str,
        *,
        retry: bool | None = None,
        client_token: str | None = None,
        **kwargs: Any,
    ) -> requests.Response:
        """Send through the session, retrying when it is safe; return any final response.

        *retry* ``None`` means: safe methods are retried, others only with a *client_token*
        (already in the headers) that the caller vouches the server replays.  Connection
        errors that end the attempts raise :class:`ConnectionFailed`.
        """
        method = method.upper()
        if retry is None:
            retry = method in _SAFE_METHODS
        policy = self.retry if retry else NO_RETRY
        attempt = 0
        waited_in_flight = 0.0
        while True:
            attempt += 1
            try:
                response = self.session.request(method, path, **kwargs)
            except (requests.ConnectionError, requests.Timeout) as exc:
                if attempt >= policy.attempts:
                    note = f" after {attempt} attempts" if attempt > 1 else ""
                    if client_token is not None:
                        note += _token_note(client_token)
                    raise ConnectionFailed(
                        f"no answer from {self.session.endpoint} to {method} {path}{note}: {_short(exc)}",
                        attempts=attempt, client_token=client_token,
                    ) from exc
                pause = policy.delay(attempt)
                LOG.info("%s %s: %s; retrying in %.2f s (attempt %d of %d)",
                         method, path, _short(exc), pause, attempt + 1, policy.attempts)
                policy.sleep(pause)
                continue
            status = response.status_code
            if retry and status in policy.statuses and attempt < policy.attempts:
                pause = policy.delay(attempt, _retry_after(response))
                LOG.info("%s %s: %s; retrying in %.2f s (attempt %d of %d)",
                         method, path, status, pause, attempt + 1, policy.attempts)
                response.close()
                policy.sleep(pause)
                continue
            if (retry and client_token is not None and status == 409
                    and response.headers.get("Retry-After") is not None):
                # The draft's "request still in progress": same token, wait, ask again.
                pause = _retry_after(response) or policy.backoff
                if waited_in_flight + pause <= policy.in_flight_timeout:
                    LOG.info("%s %s: in flight on the server; asking again in %.2f s", method, path, pause)
                    waited_in_flight += pause
                    response.close()
                    policy.sleep(pause)
                    attempt -= 1  # waiting is not a failed attempt
                    continue
                setattr(response, _GAVE_UP, f"still in progress after waiting {waited_in_flight:g} s")
            elif retry and status in policy.statuses and attempt > 1:
                setattr(response, _GAVE_UP, f"gave up after {attempt} attempts")
            return response


def _short(exc: BaseException) -> str:
    """The cause of a requests/urllib3 connection error in a few words, e.g.
    ``[Errno 111] Connection refused``, ``read timed out (0.5 s)``."""
    if isinstance(exc, requests.ReadTimeout):
        return "read timed out"
    if isinstance(exc, requests.ConnectTimeout):
        return "connect timed out"
    reason: Any = exc.args[0] if exc.args else exc
    reason = getattr(reason, "reason", reason)  # urllib3's MaxRetryError -> its cause
    args: tuple[Any, ...] = tuple(getattr(reason, "args", ()))
    if len(args) == 2 and isinstance(args[0], str) and isinstance(args[1], BaseException):
        text = f"{args[0].rstrip('.').lower()}: {args[1]}"  # ('Connection aborted.', RemoteDisconnected(...))
    else:
        text = str(reason)
        if "): " in text and text.startswith(("HTTPConnection", "HTTPSConnection", "<urllib3")):
            text = text.split("): ", 1)[1]  # drop urllib3's "HTTPConnection(host=..., port=...)"
        text = text.removeprefix("Failed to establish a new connection: ")
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."


class Resource:
    """One resource as the server last showed it, with its etag.

    Fields read as attributes (``node.name``) or items (``node["name"]``);
    :meth:`to_dict` gives a copy of the document.  ``etag`` is the ``ETag`` header
    (else the body's ``etag``), ``served_version`` the microversion of the answer;
    after a create, ``client_token`` is the token sent, ``replayed`` whether the
    server replayed an earlier answer and ``replay_guaranteed`` whether the server
    is known to replay by token.
    """

    def __init__(
        self,
        manager: ResourceManager[Any],
        data: Mapping[str, Any],
        *,
        etag: str | None = None,
        served_version: Version | None = None,
        response: requests.Response | None = None,
    ) -> None:
        self._manager = manager
        self._data = dict(data)
        body_etag = self._data.get("etag")
        self.etag: str | None = etag or (body_etag if isinstance(body_etag, str) else None)
        self.served_version = served_version
        self.response = response
        self.client_token: str | None = None
        self.replayed = False
        self.replay_guaranteed: bool | None = None

    # -- the document ---------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"{self._manager.kind} has no field {name!r}") from None

    def __getitem__(self, name: str) -> Any:
        return self._data[name]

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def get(self, name: str, default: Any = None) -> Any:
        return self._data.get(name, default)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._data)

    @property
    def manager(self) -> ResourceManager[Any]:
        return self._manager

    @property
    def ident(self) -> str:
        """The identifier used in URLs (``uuid`` by default; the manager's ``id_field``)."""
        return str(self._data[self._manager.id_field])

    def __repr__(self) -> str:
        name = self._data.get("name")
        shown = f" {name!r}" if name and self._manager.id_field != "name" else ""
        ident = self._data.get(self._manager.id_field, "?")
        return f"<{self._manager.kind} {ident}{shown} etag={self.etag!r}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resource):
            return NotImplemented
        return self._manager is other._manager and self._data == other._data and self.etag == other.etag

    __hash__ = None  # type: ignore[assignment]

    # -- actions on itself ------------------------------------------------------------

    def refresh(self: R) -> R:
        """The resource as the server shows it now (a new object)."""
        return self._manager.get(self.ident)  # type: ignore[no-any-return]

    def update(
        self: R,
        patch: Sequence[Mapping[str, Any]],
        *,
        etag: bool | str | None = None,
        retries: int = 0,
    ) -> R:
        """Apply the JSON *patch*; return the fresh resource with its new etag.

        ``etag=True`` sends ``If-Match`` with this resource's etag (a string sends that
        etag; ``False`` none; ``None`` the client's ``etag_default``).  On a stale etag
        raises :class:`EtagConflict`; with ``retries=N`` it first re-fetches and re-sends
        the same patch with the new etag, at most *N* times, while the patch still
        applies cleanly (:func:`patch_conflicts`).
        """
        return self._manager._update(self, self.ident, patch, etag=etag, retries=retries)  # type: ignore[no-any-return]

    def delete(self, *, etag: bool | str | None = None) -> None:
        """Delete it; ``etag=True`` only if it did not change since it was read
        (:class:`EtagConflict` with the diff otherwise)."""
        self._manager._delete(self, self.ident, etag=etag)


class ResourceManager(Generic[R2]):
    """The resources of one collection: ``GET/POST {path}``, ``GET/PATCH/PUT/DELETE {path}/{ident}``.

    path, key
        the collection's path (``/v1/nodes``) and the list key in its answer (``nodes``).
    kind, plural
        the resource's name in messages (``node``, ``nodes``); default *key* without a final
        ``s``, and *key* with spaces for underscores.
    id_field
        the field that names a resource in URLs (``uuid``; ``name`` for resource classes).
    etag_version
        the first microversion whose answers carry etags (``None``: this type has none).
    min_version
        the first microversion the collection exists at (a lower session version is a
        :class:`FeatureUnsupported` before any request).
    diff_ignore
        top-level fields left out of conflict diffs (default ``etag``, ``updated_at``).
    resource_class
        the :class:`Resource` subclass to build.
    """

    def __init__(
        self,
        client: ResourceClient,
        path: str,
        key: str,
        *,
        kind: str | None = None,
        plural: str | None = None,
        id_field: str = "uuid",
        etag_version: str | Version | None = None,
        min_version: str | Version | None = None,
        diff_ignore: Iterable[str] = DEFAULT_DIFF_IGNORE,
        resource_class: type[R2] = Resource,  # type: ignore[assignment]
    ) -> None:
        self.client = client
        self.path = "/" + path.strip("/")
        self.key = key
        self.kind = kind or (key[:-1] if key.endswith("s") else key)
        self.plural = plural or key.replace("_", " ")
        self.id_field = id_field
        self.etag_version = _version(etag_version, "etag_version")
        self.min_version = _version(min_version, "min_version")
        self.diff_ignore = tuple(diff_ignore)
        self.resource_class = resource_class

    @property
    def session(self) -> VersionedSession:
        return self.client.session

    # -- reading --------------------------------------------------------------------

    def get(self, ident: str, *, fields: Sequence[str] | None = None) -> R2:
        """One resource (``GET {path}/{ident}``), with its etag; :class:`NotFound` if absent."""
        self._check_available()
        params = {"fields": ",".join(fields)} if fields else None
        response = self._call("GET", self._item(ident), params=params)
        return self._wrap(response)

    def list(
        self, *, limit: int | None = None, page_size: int | None = None, detail: bool = False, **params: Any
    ) -> list[R2]:
        """All resources (following ``next`` links), at most *limit*; *page_size* is the
        query's ``limit`` (default: *limit*, else the server's); *params* are query
        parameters (a list value is sent comma-separated, ``None`` left out)."""
        return list(self.iter(limit=limit, page_size=page_size, detail=detail, **params))

    def iter(
        self, *, limit: int | None = None, page_size: int | None = None, detail: bool = False, **params: Any
    ) -> Iterator[R2]:
        """:meth:`list`, one resource at a time, a page at a time."""
        self._check_available()
        query: dict[str, Any] = {}
        for name, value in params.items():
            if value is None:
                continue
            if isinstance(value, list | tuple):
                value = ",".join(str(v) for v in value)
            elif isinstance(value, bool):
                value = "true" if value else "false"
            query[name] = value
        if page_size is None:
            page_size = limit
        if page_size is not None:
            query["limit"] = page_size
        url: str | None = f"{self.path}/detail" if detail else self.path
        count = 0
        while url is not None:
            response = self._call("GET", url, params=query)
            served = self.session.served_version(response)
            with response:
                doc = response.json()
            query = {}  # the next link carries the query
            for item in doc.get(self.key, []):
                yield self.resource_class(self, item, served_version=served)
                count += 1
                if limit is not None and count >= limit:
                    return
            nxt = doc.get("next")
            url = self._next_url(nxt) if isinstance(nxt, str) and nxt else None

    def _next_url(self, link: str) -> str:
        """A ``next`` link made usable: as is when under the endpoint, else (the server
        named itself by another host, as behind a proxy) its path from the collection on."""
        try:
            key = endpoint_key(link)
        except ConfigError:
            key = ""
        if key == self.session.key or key.startswith(self.session.key + "/"):
            return link
        parts = urlsplit(link)
        at = parts.path.find(self.path)
        if at < 0:
            raise HTTPError(f"{self.kind} list: the next link {link!r} is not under {self.session.endpoint}")
        return parts.path[at:] + (f"?{parts.query}" if parts.query else "")

    # -- writing --------------------------------------------------------------------

    def create(self, body: Mapping[str, Any], *, client_token: str | None | _Auto = AUTO) -> R2:
        """``POST {path}`` with a client token (a new one per call by default, the given one,
        or none with ``client_token=None``); returns the new resource.

        With a token the server replays, lost answers, read timeouts, 502/503/504 and 409 "in
        flight" are retried with the *same* token, so at most one resource is made; the
        returned resource's ``replayed`` says whether its answer was a replay.  Without a
        token the create is sent once.  A server that does not replay (see
        :class:`ResourceClient` ``replay``) still gets the token, with a warning, and no retries.
        """
        self._check_available()
        token = new_client_token() if isinstance(client_token, _Auto) else client_token
        guaranteed: bool | None = None
        if token is not None:
            guaranteed = self.client.replay_supported()
            if not guaranteed:
                self.client.warn_once(
                    "replay",
                    "%s does not replay creates by client token (e.g. OpenStack Ironic ignores "
                    "X-Client-Token): the token is sent, but replay is not guaranteed, so creates "
                    "are not retried automatically", self.session.endpoint)
        headers = self.client.token_headers(token)
        response = self._call("POST", self.path, json=dict(body), headers=headers,
                              retry=bool(guaranteed), client_token=token)
        resource = self._wrap(response)
        resource.client_token = token
        resource.replayed = response.headers.get(REPLAYED_HEADER, "").strip().lower() == "true"
        resource.replay_guaranteed = guaranteed
        return resource

    def update(
        self,
        ident: str,
        patch: Sequence[Mapping[str, Any]],
        *,
        etag: str | None = None,
    ) -> R2:
        """``PATCH {path}/{ident}`` with the JSON *patch*; *etag* goes into ``If-Match``."""
        return self._update(None, ident, patch, etag=etag, retries=0)

    def delete(self, ident: str, *, etag: str | None = None) -> None:
        """``DELETE {path}/{ident}``; *etag* goes into ``If-Match``."""
        self._delete(None, ident, etag=etag)

    def put(self, ident: str, body: Any = None) -> bool:
        """``PUT {path}/{ident}`` (an idempotent create-or-confirm, so it is retried);
        ``True`` if it created the resource (201), ``False`` if it already existed."""
        self._check_available()
        kwargs: dict[str, Any] = {} if body is None else {"json": body}
        response = self._call("PUT", self._item(ident), retry=True, **kwargs)
        response.close()
        return response.status_code == 201

    def action(
        self, ident: str, subpath: str, *, method: str = "PUT", json: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        """A request on a sub-resource (``PUT {path}/{ident}/states/power``); returns the
        decoded JSON body, ``None`` when empty.  Not retried unless it is a GET."""
        self._check_available()
        kwargs: dict[str, Any] = {}
        if json is not None:
            kwargs["json"] = json
        if params:
            kwargs["params"] = dict(params)
        response = self._call(method, f"{self._item(ident)}/{subpath.strip('/')}", **kwargs)
        with response:
            if not response.content:
                return None
            try:
                return response.json()
            except ValueError:
                return response.text

    # -- etags ----------------------------------------------------------------------

    def supports_etags(self) -> bool:
        """Whether requests at the session's version carry etags for this type."""
        if self.etag_version is None:
            return False
        return self.client.version() >= self.etag_version

    def check_etags(self) -> Version:
        """The session's version if it has etags for this type, else :class:`EtagUnsupported`."""
        version = self.client.version()
        server_max = self.client.server_max()
        need = self.etag_version
        if need is None:
            raise EtagUnsupported(
                f"{self.plural} carry no etags in this API, so no If-Match can be sent",
                etag_version=None, version=version, server_max=server_max)
        if version >= need:
            return version
        known = self.session.server_range()
        if known is not None and (not known.versioned or known.max_version < need):
            shown = f"[{known.min_version}, {known.max_version}]" if known.versioned else "1.0 only"
            message = (f"{self.session.endpoint} does not support etags: they need microversion {need} "
                       f"or later and the server supports {shown}; no If-Match can be sent")
        else:
            message = (f"etags need microversion {need} or later, but this session uses {version}"
                       f"{' (pinned)' if self.session.pinned is not None else ''}; no If-Match can be sent")
        raise EtagUnsupported(message, etag_version=need, version=version, server_max=server_max)

    def _if_match(self, resource: Resource | None, ident: str, etag: bool | str | None) -> str | None:
        if etag is None:
            etag = self.client.etag_default
        if etag is False:
            return None
        version = self.check_etags()
        if etag is True:
            if resource is None:
                raise MissingEtag(f"etag=True needs a {self.kind} that was read first; pass the etag "
                                  "itself, or use the resource's own update()/delete()")
            if not resource.etag:
                raise MissingEtag(
                    f"{self.kind} {ident} carries no etag although microversion {version} has etags "
                    f"(it was read at {resource.served_version or 'an unknown version'}, or from a list "
                    f"that shows no etags); read it again with get() before using etag=True")
            return resource.etag
        if not isinstance(etag, str) or not etag.strip():
            raise MissingEtag(f"etag must be True, False or an etag string, got {etag!r}")
        return etag.strip()

    def _update(
        self,
        resource: Resource | None,
        ident: str,
        patch: Sequence[Mapping[str, Any]],
        *,
        etag: bool | str | None,
        retries: int,
    ) -> R2:
        self._check_available()
        if retries < 0:
            raise ConfigError(f"retries must be >= 0, got {retries}")
        patch = [dict(op) for op in patch]
        if_match = self._if_match(resource, ident, etag)
        current = resource
        attempt = 0
        while True:
            attempt += 1
            headers = {"If-Match": if_match} if if_match is not None else {}
            response = self.client.send("PATCH", self._item(ident), json=patch, headers=headers)
            if response.status_code != 412 or if_match is None:
                return self._wrap(self._raise_for(response))
            stale = error_from_response(response)
            response.close()
            remote = self._current(ident)
            local = current.to_dict() if current is not None else {}
            if remote is not None and attempt <= retries and current is not None:
                reason = patch_conflicts(patch, local, remote.to_dict())
                if reason is None and remote.etag:
                    LOG.info("%s %s changed on the server; re-applying the patch on its new state "
                             "(attempt %d of %d)", self.kind, ident, attempt + 1, retries + 1)
                    current, if_match = remote, remote.etag
                    continue
            else:
                reason = None
            raise self._conflict(stale, ident, local, remote, patch, attempt, reason, retries)

    def _delete(self, resource: Resource | None, ident: str, *, etag: bool | str | None) -> None:
        self._check_available()
        if_match = self._if_match(resource, ident, etag)
        headers = {"If-Match": if_match} if if_match is not None else {}
        response = self.client.send("DELETE", self._item(ident), headers=headers)
        if response.status_code == 412 and if_match is not None:
            stale = error_from_response(response)
            response.close()
            local = resource.to_dict() if resource is not None else {}
            raise self._conflict(stale, ident, local, self._current(ident), None, 1, None, 0)
        self._raise_for(response).close()

    def _current(self, ident: str) -> R2 | None:
        try:
            return self.get(ident)
        except NotFound:
            return None

    def _conflict(
        self, stale: HTTPError, ident: str, local: Mapping[str, Any], remote: R2 | None,
        patch: Sequence[Mapping[str, Any]] | None, attempts: int, reason: str | None, retries: int,
    ) -> EtagConflict:
        remote_doc = remote.to_dict() if remote is not None else None
        diff = diff_documents(local, remote_doc, self.diff_ignore) if local and remote_doc is not None else []
        if remote_doc is None:
            what = "was deleted on the server"
        elif local:
            what = f"changed on the server since it was read: {format_diff(diff)}"
        else:
            what = (f"changed on the server since the given etag was read; its current etag is "
                    f"{remote.etag if remote is not None else None}")
        message = f"{self.kind} {ident} {what} (412, stale etag)"
        if attempts > 1:
            message += f"; gave up after {attempts} attempts"
        if reason is not None and retries:
            message += f"; not retried: {reason}"
        return EtagConflict(message, local=local, remote=remote_doc, diff=diff, patch=patch,
                            attempts=attempts, response=stale.response, code=stale.code,
                            detail=stale.detail)

    # -- plumbing -------------------------------------------------------------------

    def _item(self, ident: str) -> str:
        if not ident or "/" in ident:
            raise ValueError(f"invalid {self.kind} identifier {ident!r}")
        return f"{self.path}/{ident}"

    def _check_available(self) -> None:
        if self.min_version is None:
            return
        version = self.client.version()
        if version < self.min_version:
            known = self.session.server_range()
            where = (f"the server supports [{known.min_version}, {known.max_version}]"
                     if known is not None and known.versioned else "the server has no microversions")
            raise FeatureUnsupported(
                f"{self.plural} need microversion {self.min_version} or later; this session uses "
                f"{version} and {where}")

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self._raise_for(self.client.send(method, path, **kwargs), kwargs.get("client_token"))

    def _raise_for(self, response: requests.Response, client_token: str | None = None) -> requests.Response:
        if response.status_code < 400:
            return response
        error = error_from_response(response, client_token=client_token)
        response.close()
        raise error

    def _wrap(self, response: requests.Response) -> R2:
        with response:
            data = response.json() if response.content else {}
        if not isinstance(data, dict):
            raise HTTPError(f"{self.kind}: expected a JSON object from {response.url}, "
                            f"got {type(data).__name__}", response=response)
        return self.resource_class(
            self, data, etag=response.headers.get("ETag"),
            served_version=self.session.served_version(response), response=response,
        )
