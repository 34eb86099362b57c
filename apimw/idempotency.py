"""``X-Client-Token`` idempotent replay: a retried POST gets the first answer, never a second server.

Place it **after** keystonemiddleware's ``auth_token`` in the pipeline: the scope
of a token is the authenticated project (``X-Project-Id``, which ``auth_token``
strips from the client's request and sets itself).  See ``docs/idempotency.md``.

Per request with a token (``X-Client-Token``, or ``Idempotency-Key``)::

    token -> scope -> body (buffered, capped) -> fingerprint -> claim(key, lease)
      won:  run the app, store the response (owner-fenced) *before* sending it
      lost: same fingerprint -> replay | in flight -> 409 | other request -> 409 (422)

Requests without a token, and methods not configured, go straight to the app
without a store call.  The rules are :mod:`apimw._idempotency_rules` (sans-IO, shared
with :mod:`apimw.asgi`); this module is their WSGI door.

Header names: the WSGI environ folds a header's ``-`` into ``_``, so ``X_Project_Id``
and ``X-Project-Id`` reach the middleware alike.  gunicorn (``header_map = drop``, its
default since 22.0), werkzeug's server and nginx (``underscores_in_headers off``) drop
header lines whose name holds an underscore; a server that folds them (the standard
library's ``wsgiref``) lets a client forge the project: put such a server behind a proxy
that drops them.  The ASGI door matches header names exactly itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from apimw import _wsgi
from apimw._config import (
    integration,
    oslo_config,
)
from apimw._idempotency_body import read_body
from apimw._idempotency_capture import Exchange, run_ops
from apimw._idempotency_identity import ClientToken as ClientToken
from apimw._idempotency_lease import Renewer
from apimw._idempotency_metered import MeteredStore
from apimw._idempotency_options import GROUP, OPTION_DOCS, OPTIONS
from apimw._idempotency_probe import probe_store
from apimw._idempotency_records import NOT_STORED as NOT_STORED
from apimw._idempotency_rules import (
    CLIENT_TOKEN_HEADER as CLIENT_TOKEN_HEADER,
)
from apimw._idempotency_rules import (
    ENVIRON_IDENTITY_STATUS,
    ENVIRON_PROJECT_ID,
    ENVIRON_REPLAYED,
    ENVIRON_STATUS,
    ENVIRON_TENANT_ID,
    ENVIRON_TOKEN,
    ENVIRON_USER_ID,
    UNPROTECTED_MARK,
    Admitted,
    Claimed,
    IdempotencyRules,
    Pass,
    Reply,
    Unprotected,
    cgi_facts,
    check_order,
    shared_scope,
)
from apimw._idempotency_rules import (
    IDEMPOTENCY_KEY_HEADER as IDEMPOTENCY_KEY_HEADER,
)
from apimw._idempotency_rules import REPLAYED_HEADER as REPLAYED_HEADER
from apimw._stores import Store as Store
from apimw._stores import open_store as open_store
from apimw.errors import ConfigError, HTTPProblem
from apimw.metrics import Metrics, as_metrics

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "ENVIRON_IDENTITY_STATUS",
    "ENVIRON_PROJECT_ID",
    "ENVIRON_REPLAYED",
    "ENVIRON_STATUS",
    "ENVIRON_TENANT_ID",
    "ENVIRON_TOKEN",
    "ENVIRON_USER_ID",
    "GROUP",
    "OPTIONS",
    "ClientToken",
    "IdempotencyMiddleware",
    "Store",
    "client_token",
    "filter_factory",
    "list_opts",
    "open_store",
    "oslo_hook",
    "wrap_flask",
]


# environ keys: the request headers read
ENVIRON_CLIENT_TOKEN: Final = "HTTP_X_CLIENT_TOKEN"  # noqa: S105 - an environ key
ENVIRON_IDEMPOTENCY_KEY: Final = "HTTP_IDEMPOTENCY_KEY"


def client_token(request: Any) -> ClientToken | None:
    """The :class:`ClientToken` of the request the app is running, ``None`` without a token.

    *request* is the WSGI environ or the ASGI scope (the key is the same on both doors).
    """
    found = request.get(ENVIRON_TOKEN)
    return found if isinstance(found, ClientToken) else None


class IdempotencyMiddleware:
    """Replay the stored answer of a POST retried with the same ``X-Client-Token`` (WSGI).

    ``store`` may also be a :class:`Store` object (:func:`open_store`), ``scope`` a callable of
    the environ.  The ASGI twin, :class:`apimw.asgi.IdempotencyMiddleware`, takes the same
    options and runs the same rules.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        store: str | Store = "memory://",
        store_timeout: float = 0.5,
        metrics: Metrics | str | None = None,
        **options: Any,
    ) -> None:
        check_order(app)
        self.app = app
        self.metrics = as_metrics(metrics)
        if isinstance(store, str):
            if store_timeout <= 0:
                raise ConfigError(f"idempotency: store_timeout must be > 0, got {store_timeout}")
            store = open_store(store, timeout=store_timeout)
        #: the options, validated, and the decisions (:class:`~apimw._idempotency_rules.IdempotencyRules`)
        self.rules = IdempotencyRules(store_name=store.name, metrics=self.metrics, **options)
        self.store = store
        probe_store(store, self.rules)

    def __repr__(self) -> str:
        return f"<IdempotencyMiddleware store={self.store.name} methods={sorted(self.rules.methods)}>"

    @property
    def store(self) -> Store:
        """The replay store (may be replaced; with ``metrics``, its calls are timed)."""
        return self._store

    @store.setter
    def store(self, store: Store) -> None:
        self._store = store
        #: what the middleware calls: the store, or the store timed for ``metrics``
        self._calls: Store = store if self.metrics is None else MeteredStore(store, self.metrics)
        self._renewer = Renewer(self._calls, self.rules.lease) if self.rules.renew_lease else None

    def close(self) -> None:
        """Close the store's connections (call at shutdown; the middleware reconnects if used again)."""
        if self._renewer is not None:
            self._renewer.stop()
        self.store.close()

    # -- the hot path ------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        rules = self.rules
        if not rules.protects(environ.get("REQUEST_METHOD", "")):
            return self.app(environ, start_response)
        client_token = environ.get(ENVIRON_CLIENT_TOKEN)
        key_header = environ.get(ENVIRON_IDEMPOTENCY_KEY) if rules.accept_key else None
        if client_token is None and key_header is None and not rules.require_token:
            return self.app(environ, start_response)
        facts = cgi_facts(rules, environ, client_token, key_header)
        admitted = rules.admit(facts)
        if isinstance(admitted, Pass):
            return self.app(environ, start_response)
        decision: Reply | Claimed | Unprotected
        if isinstance(admitted, Admitted):
            body = read_body(environ, rules.max_request)
            if isinstance(body, HTTPProblem):
                decision = rules.problem(facts, body)
            else:
                decision = run_ops(rules.claim(facts, admitted, body), self._calls)
        else:
            decision = admitted
        environ.update(decision.keys)
        if isinstance(decision, Reply):
            start_response(decision.status, decision.headers)
            return [decision.body] if decision.body else []
        if isinstance(decision, Claimed):
            exchange = Exchange(self.app, self._calls, self._renewer, rules.keeping, environ,
                                start_response, decision.claim, decision.token)  # fmt: skip
            try:
                return exchange.run()
            finally:
                rules.exchanged(environ, exchange.replayed)
        return self.app(environ, _wsgi.StartResponse(start_response, _marked))  # Unprotected


def _marked(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """*headers* with ``Idempotency-Status: unprotected``."""
    return [*headers, UNPROTECTED_MARK]


IdempotencyMiddleware.__doc__ = f"{IdempotencyMiddleware.__doc__}{OPTION_DOCS}"


# -- configuration --------------------------------------------------------------------------

filter_factory, wrap_flask, list_opts, oslo_hook, __getattr__ = integration(
    IdempotencyMiddleware, OPTIONS, GROUP
)


def ironic_hook(app: WSGIApplication) -> WSGIApplication:
    """``apimw_idempotency`` for OpenStack Ironic's ``[api] middleware`` hook (docs/adopting.md).

    Ironic applies that hook outside its own authentication, so a replay would be answered
    before auth runs, and a ``project`` or ``user`` scope would trust an ``X-Project-Id`` that
    any caller can send.  This builds the middleware like :func:`oslo_hook` only where that is
    safe: Ironic without authentication (``[DEFAULT] auth_strategy = noauth``) and
    ``scope = shared``; anything else is a :class:`ConfigError` when Ironic builds its API.
    """
    conf = oslo_config().CONF
    try:
        strategy = conf.auth_strategy
    except AttributeError:  # oslo.config's NoSuchOptError: not Ironic's configuration
        raise ConfigError(
            f"oslo.config [{GROUP}]: the host has no [DEFAULT] auth_strategy, so whether its hook runs "
            "before authentication cannot be told; apimw_idempotency is Ironic's (auth_strategy = noauth)"
        ) from None
    if strategy != "noauth":
        raise ConfigError(
            f"oslo.config [{GROUP}]: Ironic's [api] middleware runs before its authentication, so with "
            f"auth_strategy = {strategy} a replay would be answered to unauthenticated callers; leave "
            "apimw_idempotency out of the hook (docs/adopting.md)"
        )
    built = oslo_hook(app)
    if not isinstance(built, IdempotencyMiddleware) or built.rules.scope_fn is not shared_scope:
        scope = conf[GROUP].scope
        close = getattr(built, "close", None)
        if close is not None:
            close()
        raise ConfigError(
            f"oslo.config [{GROUP}]: scope = {scope} trusts X-Project-Id / X-User-Id headers that, before "
            "Ironic's authentication, any caller can send; set scope = shared (noauth: one tenant)"
        )
    return built
