"""The idempotency middleware for ASGI (:class:`IdempotencyMiddleware`).

The ASGI door of the rules in :mod:`apimw._idempotency_rules` (the WSGI door is
:mod:`apimw.idempotency`): it reads the request's facts from the scope, awaits the
store calls the rules yield, and moves the app's messages:

* header names are matched exactly as HTTP defines them: ``x_project_id`` is not
  ``x-project-id`` (a line whose name holds an underscore is dropped, as gunicorn does),
  and the lines of a repeated header are joined with ``,`` as WSGI servers join them (so
  two ``X-Client-Token`` lines get the same 400 as on WSGI);
* what the middleware hands the app is in the scope under the ``apimw.`` keys only
  (:func:`~apimw.idempotency.client_token`); no CGI key is written into the scope;
* the answer is kept up to ``max_response_bytes`` and stored before its first byte is
  sent; past that, or when it cannot be stored (``http.response.pathsend``,
  ``http.response.zerocopy``, an answer with trailers), a tombstone is stored and the
  answer streams through untouched;
* an answer that did not complete before it was stored (an exception, a cancellation, an
  app that returns without its last body message) releases the claim; the release is
  shielded from the cancellation of an outer cancel scope.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from apimw._idempotency_body import read_body
from apimw._idempotency_capture import Answering
from apimw._idempotency_lease import Renewer
from apimw._idempotency_metered import MeteredStore
from apimw._idempotency_options import OPTION_DOCS
from apimw._idempotency_probe import probe_store
from apimw._idempotency_rules import (
    CLIENT_TOKEN_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    UNPROTECTED_MARK,
    Admitted,
    Claimed,
    IdempotencyRules,
    Pass,
    Reply,
    Unprotected,
    cgi_facts,
    check_order,
)
from apimw._stores import Store, open_store
from apimw._stores.aio import AsyncStore, asyncio_twin, is_async_store
from apimw.asgi._glue import (
    ASGIApp,
    Message,
    RawHeaders,
    Receive,
    Replay,
    Scope,
    Send,
    add_request_keys,
    await_ops,
    header_environ,
    header_values,
    raw_headers,
    receive_body,
    rereadable,
    send_text,
    set_request_headers,
    text_headers,
)
from apimw.errors import (
    ENVIRON_MIDDLEWARE_ANSWER,
    ConfigError,
    HTTPProblem,
    problem_answer,
    status_line,
)
from apimw.metrics import as_metrics

try:  # Starlette and FastAPI run on anyio: its cancel scopes cancel every await inside them
    import anyio
except ImportError:  # pragma: no cover - a server without anyio cancels a task once
    anyio = None  # type: ignore[assignment]

_T = TypeVar("_T")
_TOKEN: bytes = CLIENT_TOKEN_HEADER.lower().encode("latin-1")
_KEY: bytes = IDEMPOTENCY_KEY_HEADER.lower().encode("latin-1")
#: the settlements under way whose request was cancelled (a strong reference until they end)
_SETTLING: set[asyncio.Future[Any]] = set()


async def shielded(work: Awaitable[_T]) -> _T:
    """*work* run to its end even when the request is cancelled: an outer anyio cancel scope
    does not reach inside the shield, and a task's own cancellation leaves *work* running
    in its task (bounded by the store's timeout)."""
    task = asyncio.ensure_future(work)
    _SETTLING.add(task)
    task.add_done_callback(_SETTLING.discard)
    if anyio is None:
        return await asyncio.shield(task)
    with anyio.CancelScope(shield=True):
        done = await asyncio.shield(task)
    return done


def request_view(scope: Scope) -> dict[str, Any]:
    """The request's CGI keys (``HTTP_X_PROJECT_ID``, ``PATH_INFO``...) for the rules and the
    deployment's ``scope`` function, plus the scope's dotted keys an outer middleware left.

    A header line whose name holds an underscore is left out (gunicorn's ``header_map =
    drop``): in CGI form it would be indistinguishable from the hyphenated name.
    """
    lines = [line for line in scope.get("headers", ()) if b"_" not in line[0]]
    view = {key: value for key, value in scope.items() if isinstance(key, str) and "." in key}
    view.update(header_environ(lines))
    add_request_keys(scope, view)
    return view


class IdempotencyMiddleware:
    """:class:`apimw.idempotency.IdempotencyMiddleware` for ASGI: the same options and answers.

    ``store`` is a URL (the records of a WSGI service on the same store are shared), a
    blocking store, or an asyncio store.  Its calls are awaited: ``memory://`` inline,
    Redis through ``redis.asyncio``, memcached in worker threads.  ``renew_lease``
    renews from its thread through the blocking store of the same URL (never on the
    event loop).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        store: str | Store | AsyncStore = "memory://",
        store_timeout: float = 0.5,
        **options: Any,
    ) -> None:
        check_order(app)
        self.app = app
        metrics = as_metrics(options.pop("metrics", None))
        self._blocking: Store | None = None
        if is_async_store(store):
            self.store: AsyncStore = store  # type: ignore[assignment]
        elif isinstance(store, str):
            if store_timeout <= 0:
                raise ConfigError(f"idempotency: store_timeout must be > 0, got {store_timeout}")
            self._blocking = open_store(store, timeout=store_timeout)
            self.store = asyncio_twin(self._blocking, url=store, timeout=store_timeout)
        else:
            blocking: Store = store  # type: ignore[assignment]
            self._blocking = blocking
            self.store = asyncio_twin(blocking, url=None, timeout=store_timeout)
        self.rules = IdempotencyRules(store_name=self.store.name, metrics=metrics, **options)
        self._renewer: Renewer | None = None
        if self.rules.renew_lease:
            if self._blocking is None:
                raise ConfigError(
                    "idempotency: renew_lease needs a store URL or a blocking store (it renews from a thread)"
                )
            renewing: Any = self._blocking if metrics is None else MeteredStore(self._blocking, metrics)
            self._renewer = Renewer(renewing, self.rules.lease)
        if self._blocking is not None:
            probe_store(self._blocking, self.rules)
        #: what the middleware awaits: the store, or the store timed for ``metrics``
        self._calls: Any = self.store if metrics is None else MeteredStore(self.store, metrics)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        """Close the store's connections (at shutdown; reconnects if used again)."""
        if self._renewer is not None:
            self._renewer.stop()
        await self.store.aclose()
        if self._blocking is not None and self._blocking is not getattr(self.store, "store", None):
            self._blocking.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        rules = self.rules
        if scope["type"] != "http" or not rules.protects(scope["method"]):
            await self.app(scope, receive, send)
            return
        client_token, key_header = header_values(scope.get("headers", ()), _TOKEN, _KEY)
        if not rules.accept_key:
            key_header = None
        if client_token is None and key_header is None and not rules.require_token:
            await self.app(scope, receive, send)
            return
        view = request_view(scope)
        facts = cgi_facts(rules, view, client_token, key_header)
        admitted = rules.admit(facts)
        if isinstance(admitted, Pass):
            await self.app(scope, receive, send)
            return
        body = b""
        decision: Reply | Claimed | Unprotected
        if isinstance(admitted, Admitted):
            read = await self._body(scope, view, receive)
            if isinstance(read, HTTPProblem):
                decision = rules.problem(facts, read)
            else:
                body = read
                decision = await await_ops(rules.claim(facts, admitted, body), self._calls)
        else:
            decision = admitted
        scope.update(decision.keys)
        if isinstance(decision, Reply):
            await send_text(send, decision.status, decision.headers, decision.body)
            return
        app_receive = Replay(body, receive).receive
        if isinstance(decision, Claimed):
            await self._exchange(scope, app_receive, send, decision)
            return
        marker = raw_headers([UNPROTECTED_MARK])  # Unprotected

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *marker]}
            await send(message)

        await self.app(scope, app_receive, marked)

    async def _body(self, scope: Scope, view: dict[str, Any], receive: Receive) -> bytes | HTTPProblem:
        """The request body for the fingerprint (capped); the app gets the same bytes, with an
        exact ``Content-Length`` in the scope's headers."""
        length, encoding = view.get("CONTENT_LENGTH"), view.get("HTTP_TRANSFER_ENCODING")
        reading: dict[str, Any] = {
            "wsgi.input": await receive_body(receive, self.rules.max_request),
            "wsgi.input_terminated": True,  # ASGI bodies are framed
        }
        if length is not None:
            reading["CONTENT_LENGTH"] = length
        if encoding is not None:
            reading["HTTP_TRANSFER_ENCODING"] = encoding
        body = read_body(reading, self.rules.max_request)
        if isinstance(body, HTTPProblem):
            return body
        dropped = [b"transfer-encoding"] if encoding is not None else []
        if length != str(len(body)):
            dropped.append(b"content-length")
        if dropped:
            added: RawHeaders = [(b"content-length", str(len(body)).encode("latin-1"))]
            set_request_headers(scope, dropped, added if b"content-length" in dropped else [])
        return body

    async def _exchange(self, scope: Scope, receive: Receive, send: Send, claimed: Claimed) -> None:
        """The app runs under the claim; its answer is stored (or the claim released or
        tombstoned, :class:`~apimw._idempotency_capture.Answering`'s rule), then sent."""
        rules, calls = self.rules, self._calls
        answering = Answering(rules.keeping, self._renewer, claimed.claim, claimed.token, scope)
        start: Message | None = None
        finished = False
        client_left = False

        async def app_receive() -> Message:
            nonlocal client_left
            message = await receive()
            if message["type"] == "http.disconnect":
                client_left = True
            return message

        async def send_unstored() -> None:
            """The answer goes out before it is complete: release or tombstone first, then what
            was held."""
            headers = await await_ops(answering.streaming_out(), calls)
            assert start is not None  # noqa: S101 - streaming_out raises without a start
            await send({**start, "headers": raw_headers(headers)})
            for chunk in answering.take():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async def app_send(message: Message) -> None:
            nonlocal start, finished
            kind = message["type"]
            if answering.streaming or finished:
                await send(message)
                return
            if kind == "http.response.start":
                start = rereadable(message)
                answering.status = status_line(int(start["status"]))
                answering.headers = text_headers(start.get("headers", ()))
                if start.get("trailers") or answering.declared_too_large(answering.headers):
                    await send_unstored()  # trailers are not stored: the answer streams
                return
            if kind == "http.response.body" and start is not None:
                answering.add(bytes(message.get("body", b"")))
                if not message.get("more_body", False):
                    finished = True
                    # stored before the first byte is sent: a client that retries gets the replay
                    status, headers, body = await await_ops(answering.finishing(), calls)
                    await send({**start, "headers": raw_headers(headers)})
                    await send({"type": "http.response.body", "body": body, "more_body": False})
                elif answering.too_large():
                    await send_unstored()
                return
            # pathsend, zerocopy (the server sends a file) or any other kind: not storable
            await send_unstored()
            await send(message)

        answering.begin()
        try:
            try:
                await self.app(scope, app_receive, app_send)
            except HTTPProblem as problem:
                if answering.streaming or finished:
                    raise
                # a deliberate error answer from the app: rendered here, the app's answer (stored)
                answering.restart()
                status, headers, body = problem_answer(scope, problem, method=scope["method"],
                                                       profile=rules.keeping.profile)  # fmt: skip
                scope.pop(ENVIRON_MIDDLEWARE_ANSWER, None)
                answering.status, answering.headers = status, headers
                answering.add(body)
                status, headers, body = await await_ops(answering.finishing(), calls)
                await send_text(send, status, headers, body)
                return
            except BaseException:
                if not answering.settled:
                    await shielded(await_ops(answering.releasing(), calls))
                raise
            if not (finished or answering.streaming):
                # The app returned without its last body message (its client left mid-answer, or
                # it gave up): never stored, and the token is free again (no Idempotency-Status:
                # no tombstone).  The client is told no more than the app said.
                await shielded(await_ops(answering.releasing(), calls))
                if start is not None:
                    await send({**start, "headers": raw_headers(answering.headers)})
                    for chunk in answering.take():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                elif not client_left:  # nobody left: an app that answers nothing is in error
                    raise RuntimeError("the ASGI app returned without sending http.response.start")
        finally:
            answering.unrenew()
            rules.exchanged(scope, answering.replayed)


IdempotencyMiddleware.__doc__ = f"{IdempotencyMiddleware.__doc__}{OPTION_DOCS}"
