"""``http_basic``: HTTP basic authentication against an htpasswd file (Ironic's ``http_basic``).

The file holds ``user:<bcrypt hash>`` lines, as ``htpasswd -B`` writes them
(``$2y$``, ``$2a$`` or ``$2b$``; any other digest is refused at startup, as
Ironic and oslo.middleware refuse it).  Passwords are checked with the
``bcrypt`` library.

What a request gets:

* no ``Authorization`` header, another scheme, malformed credentials, an unknown
  user or a wrong password -> **401** with ``WWW-Authenticate: Basic
  realm="..."`` and a JSON error body (``apimw.errors``; stable code
  ``auth.unauthenticated``).  The answer never says which of user or password
  was wrong, and an unknown user costs a bcrypt check too (no user probing by
  timing).
* the right credentials -> the request goes on with the identity headers
  keystonemiddleware's ``auth_token`` would set (``X-Identity-Status:
  Confirmed``, ``X-User-Id``, ``X-User-Name``, ``X-Roles``, and ``X-Project-Id``
  when a project is configured) and **every identity header the client sent
  removed first** (``X-Project-Id``, ``X-Tenant-Id``, ``X-User-Id``,
  ``X-Roles``, ``X-Service-*``...).  So the idempotency middleware's scope, and
  the project the API scopes data to, come only from verified identity.

Like Ironic's ``http_basic``, an htpasswd user is an operator of the whole
deployment: without ``project_id`` no project header is set (the API treats the
caller as unscoped, and client tokens share one scope).  ``project_id`` pins
every user to one project instead.

bcrypt is deliberately slow (~0.1-0.3 s a check); a verified ``Authorization``
value is remembered for ``cache_ttl`` seconds under an HMAC of the header with a
per-process random key (never the password itself), and forgotten when the
file changes.  ``cache_ttl = 0`` checks every request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

import bcrypt

from apimw.errors import ConfigError, HTTPProblem, check_profile, respond_with_problem
from apimw.idempotency import ENVIRON_PROJECT_ID, ENVIRON_USER_ID

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = ["IDENTITY_HEADERS", "BasicAuthMiddleware", "filter_factory", "load_htpasswd", "strip_identity"]

LOG = logging.getLogger(__name__)

ENV_AUTHORIZATION: Final = "HTTP_AUTHORIZATION"
ENV_IDENTITY_STATUS: Final = "HTTP_X_IDENTITY_STATUS"
ENV_USER_ID: Final = ENVIRON_USER_ID
ENV_USER_NAME: Final = "HTTP_X_USER_NAME"
ENV_USER: Final = "HTTP_X_USER"
ENV_ROLES: Final = "HTTP_X_ROLES"
ENV_PROJECT_ID: Final = ENVIRON_PROJECT_ID
WWW_AUTHENTICATE: Final = "WWW-Authenticate"
#: environ key: the verified user name (also in X-User-Id / X-User-Name).
ENVIRON_USER: Final = "baremetal.auth.user"

_KSM_NAMES: Final = (
    "Identity-Status", "Domain-Id", "Domain-Name", "Project-Id", "Project-Name",
    "Project-Domain-Id", "Project-Domain-Name", "User-Id", "User-Name", "User-Domain-Id",
    "User-Domain-Name", "Roles", "Is-Admin-Project", "System-Scope", "Service-Catalog",
    "Tenant-Id", "Tenant-Name", "Tenant", "User", "Role", "Trust-Id", "Trustee-Id",
    "Trustor-Id", "Application-Credential-Id", "Application-Credential-Name",
    "Application-Credential-Access-Rules", "Auth-Methods",
)  # fmt: skip
#: Every header auth_token sets (and its ``X-Service-*`` twins): removed from the client's request.
IDENTITY_HEADERS: Final = frozenset(
    {f"X-{name}" for name in _KSM_NAMES}
    | {f"X-Service-{name}" for name in _KSM_NAMES}
    | {"OpenStack-System-Scope"}  # a system-scoped token's (keystonemiddleware's name for it)
)
_IDENTITY_ENVIRON: Final = frozenset("HTTP_" + h.upper().replace("-", "_") for h in IDENTITY_HEADERS)

_BCRYPT_PREFIXES: Final = ("$2y$", "$2a$", "$2b$")
_USER_RE: Final = re.compile(r"^[A-Za-z0-9_\-.@+]{1,255}\Z")
_PROJECT_RE: Final = re.compile(r"^[A-Za-z0-9_\-.:@]{1,255}\Z")
_CACHE_MAX: Final = 1024


def strip_identity(environ: WSGIEnvironment) -> None:
    """Remove every identity header a client may have sent (keystonemiddleware does the same)."""
    for key in [k for k in environ if k in _IDENTITY_ENVIRON]:
        del environ[key]


def load_htpasswd(path: str) -> dict[str, bytes]:
    """``{user: bcrypt hash}`` from an htpasswd file; ConfigError for anything but bcrypt entries."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"http_basic: cannot read the htpasswd file {path!r}: {exc}") from None
    users: dict[str, bytes] = {}
    for number, line in enumerate(lines, 1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        user, sep, digest = entry.partition(":")
        if not sep or not _USER_RE.match(user):
            raise ConfigError(f"http_basic: {path}:{number}: expected 'user:<bcrypt hash>'")
        if not digest.startswith(_BCRYPT_PREFIXES):
            # the hash itself is never echoed
            raise ConfigError(
                f"http_basic: {path}:{number}: only bcrypt digests are supported for {user!r} (htpasswd -B)"
            )
        users[user] = digest.encode("ascii", "replace")
    return users


def _dummy_hash(users: Mapping[str, bytes]) -> bytes:
    """A hash checked for unknown users, at the file's cost, so they cost as much as known ones."""
    cost = 12
    for digest in users.values():
        match = re.match(rb"^\$2[aby]\$(\d\d)\$", digest)
        if match and 4 <= int(match.group(1)) <= 31:
            cost = int(match.group(1))
            break
    return bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(rounds=cost))


def _parse_basic(value: str) -> tuple[str, bytes] | None:
    """``Basic <base64(user:password)>`` -> (user, password); None when malformed."""
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "basic" or not token.strip():
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user_bytes, sep, password = decoded.partition(b":")
    if not sep:
        return None
    try:
        user = user_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return user, password


class BasicAuthMiddleware:
    """Verify ``Authorization: Basic`` against an htpasswd file; set the verified identity."""

    def __init__(
        self,
        app: WSGIApplication,
        *,
        user_file: str,
        realm: str = "baremetal",
        project_id: str | None = None,
        roles: Iterable[str] = ("admin",),
        cache_ttl: float = 60.0,
        error_profile: str = "ironic",
    ) -> None:
        if not user_file:
            raise ConfigError("http_basic: user_file (the htpasswd file) is required")
        if '"' in realm or "\\" in realm or not realm.isprintable():
            raise ConfigError(f"http_basic: realm must be printable without quotes, got {realm!r}")
        if project_id is not None and not _PROJECT_RE.match(project_id):
            raise ConfigError(f"http_basic: malformed project_id {project_id!r}")
        role_list = [r.strip() for r in roles if r.strip()]
        if any("," in r or not r.isprintable() for r in role_list):
            raise ConfigError(f"http_basic: malformed roles {role_list!r}")
        if cache_ttl < 0:
            raise ConfigError("http_basic: cache_ttl must be >= 0")
        self.app = app
        self.user_file = user_file
        self.project_id = project_id
        self.roles = ",".join(role_list)
        self.cache_ttl = float(cache_ttl)
        self.error_profile = check_profile(error_profile)
        self._challenge = ((WWW_AUTHENTICATE, f'Basic realm="{realm}"'),)
        self._lock = threading.Lock()
        self._users = load_htpasswd(user_file)
        self._dummy = _dummy_hash(self._users)
        self._stamp = self._file_stamp()
        self._checked_at = time.monotonic()
        self._cache_key = secrets.token_bytes(32)
        self._cache: OrderedDict[bytes, tuple[str, float]] = OrderedDict()

    # -- the htpasswd file, reloaded when it changes (checked at most once a second) ----------

    def _file_stamp(self) -> tuple[int, int, int]:
        try:
            st = os.stat(self.user_file)
        except OSError:
            return (0, 0, 0)
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _current_users(self) -> dict[str, bytes]:
        now = time.monotonic()
        if now - self._checked_at < 1.0:
            return self._users
        with self._lock:
            self._checked_at = now
            stamp = self._file_stamp()
            if stamp != self._stamp:
                try:
                    self._users = load_htpasswd(self.user_file)
                except ConfigError as exc:
                    # keep serving with the last good file; say why
                    LOG.error("%s; keeping the previous user list", exc)
                self._stamp = stamp
                self._cache.clear()
        return self._users

    # -- verification -------------------------------------------------------------------

    def authenticate(self, header: str | None) -> str | None:
        """The verified user name for an ``Authorization`` value, else ``None``."""
        if not header:
            return None
        users = self._current_users()
        digest = hmac.new(self._cache_key, header.encode("utf-8", "surrogateescape"), hashlib.sha256).digest()
        if self.cache_ttl:
            hit = self._cache.get(digest)
            if hit is not None and hit[1] > time.monotonic() and hit[0] in users:
                return hit[0]
        parsed = _parse_basic(header)
        if parsed is None:
            return None
        user, password = parsed
        stored = users.get(user)
        try:
            ok = bcrypt.checkpw(password, stored if stored is not None else self._dummy)
        except ValueError:  # a corrupt hash in the file
            LOG.error("http_basic: the htpasswd entry of %r is not a valid bcrypt hash", user)
            ok = False
        if not ok or stored is None:
            LOG.info("http_basic: authentication failed for %r", user if _USER_RE.match(user) else "?")
            return None
        if self.cache_ttl:
            with self._lock:
                self._cache[digest] = (user, time.monotonic() + self.cache_ttl)
                while len(self._cache) > _CACHE_MAX:
                    self._cache.popitem(last=False)
        return user

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        header = environ.pop(ENV_AUTHORIZATION, None)
        strip_identity(environ)
        user = self.authenticate(header)
        if user is None:
            environ[ENV_IDENTITY_STATUS] = "Invalid"
            problem = HTTPProblem(
                401,
                "auth.unauthenticated",
                "The request you have made requires authentication.",
                headers=self._challenge,
            )
            return respond_with_problem(environ, start_response, problem, profile=self.error_profile)
        environ[ENVIRON_USER] = user
        environ[ENV_IDENTITY_STATUS] = "Confirmed"
        environ[ENV_USER_ID] = user
        environ[ENV_USER_NAME] = user
        environ[ENV_USER] = user
        if self.roles:
            environ[ENV_ROLES] = self.roles
        if self.project_id is not None:
            environ[ENV_PROJECT_ID] = self.project_id
        return self.app(environ, start_response)


def filter_factory(global_conf: Mapping[str, Any], **local_conf: str) -> Any:
    """paste.deploy: ``paste.filter_factory = baremetal_service.auth:filter_factory``.

    Keys: ``user_file`` (or ``http_basic_auth_user_file``, oslo.middleware's name),
    ``realm``, ``project_id``, ``roles`` (comma separated), ``cache_ttl``, ``error_profile``.
    """
    conf = {**global_conf, **local_conf}
    kwargs: dict[str, Any] = {
        "user_file": conf.get("user_file") or conf.get("http_basic_auth_user_file") or "",
    }
    if conf.get("realm"):
        kwargs["realm"] = conf["realm"]
    if conf.get("project_id"):
        kwargs["project_id"] = conf["project_id"]
    if "roles" in conf:
        kwargs["roles"] = str(conf["roles"]).split(",")
    if conf.get("cache_ttl"):
        try:
            kwargs["cache_ttl"] = float(conf["cache_ttl"])
        except ValueError:
            raise ConfigError(f"http_basic: cache_ttl must be a number, got {conf['cache_ttl']!r}") from None
    if conf.get("error_profile"):
        kwargs["error_profile"] = conf["error_profile"]

    def _filter(app: WSGIApplication) -> WSGIApplication:
        return BasicAuthMiddleware(app, **kwargs)

    return _filter
