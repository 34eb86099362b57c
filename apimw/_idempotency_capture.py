"""One claimed request: capture the app's answer, store it, then send it (PEP 3333 towards the app).

The answer is stored **before** its first byte is sent, so a client that times out and
retries gets the replay.  An answer too large to store (or a ``wsgi.file_wrapper`` body)
is streamed through and a tombstone is stored instead; a transient status releases the
claim so that a retry runs again.

The store calls are written sans-IO: the rules that call the store are generators that
yield each call as an :data:`Op` (``CompleteCall(key, prefix, record, ttl)``) and get its
result back (a failure is thrown in).  :func:`run_ops` runs them on a blocking store (the
WSGI middleware); ``apimw.asgi`` awaits the same ops on an asyncio store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from apimw import _idempotency_records as records
from apimw import _wsgi
from apimw._stores import RecordTooLarge, Store
from apimw.errors import ENVIRON_MIDDLEWARE_ANSWER, HTTPProblem, StoreError, respond_with_problem

if TYPE_CHECKING:
    from types import TracebackType

    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from apimw._idempotency_identity import ClientToken
    from apimw._idempotency_lease import Renewer

    ExcInfo = tuple[type[BaseException], BaseException, TracebackType] | tuple[None, None, None]

LOG: Final = logging.getLogger("apimw.idempotency")

_T = TypeVar("_T")


class ClaimCall(NamedTuple):
    """``store.claim(key, value, lease)``: the record there, or None when this call made it."""

    key: str
    value: bytes
    lease: float

    def call(self, store: Any) -> Any:
        return store.claim(self.key, self.value, self.lease)


class CompleteCall(NamedTuple):
    """``store.complete(key, expect, value, ttl)``: replace the claim (owner-fenced)."""

    key: str
    expect: bytes
    value: bytes
    ttl: float

    def call(self, store: Any) -> Any:
        return store.complete(self.key, self.expect, self.value, self.ttl)


class ReleaseCall(NamedTuple):
    """``store.release(key, expect)``: delete the claim (owner-fenced)."""

    key: str
    expect: bytes

    def call(self, store: Any) -> Any:
        return store.release(self.key, self.expect)


class GetCall(NamedTuple):
    """``store.get(key)``: the record there, or None."""

    key: str

    def call(self, store: Any) -> Any:
        return store.get(self.key)


#: One store call the rules ask for.  ``op.call(store)`` makes it on a blocking store, and
#: returns the awaitable of an asyncio one.
Op = ClaimCall | CompleteCall | ReleaseCall | GetCall
#: Rules that call the store: a generator of :data:`Op` that returns a *_T*.
Ops = Generator[Op, Any, _T]


def run_ops(ops: Ops[_T], store: Any) -> _T:
    """Run *ops* on the blocking *store*: each op is made, its result sent back in (a failure
    is thrown back in: the rules decide)."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = ops.send(result) if error is None else ops.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result = error = None
        try:
            result = op.call(store)
        except BaseException as exc:  # noqa: BLE001 - thrown back into the rules, which decide
            error = exc


class Keeping(NamedTuple):
    """How the middleware keeps answers: decided once, at its construction."""

    max_response: int
    retention: float
    drop: frozenset[str]
    replayed: tuple[str, str]
    release: frozenset[int]
    store_5xx: bool
    profile: str | None


class Claim(NamedTuple):
    """The claim a request won: its store key, the record prefix that fences it, its owner."""

    key: str
    prefix: bytes
    owner: bytes
    fp: str
    scope: str
    #: the request's method (a HEAD answer declares a length it does not send)
    method: str


def _short(key: str) -> str:
    return key[-64:][:12]


def refused(what: str, key: str) -> Ops[None]:
    """Log a fenced write the store refused, saying why: the claim's lease ran out and the
    record is gone (nobody else asked for the token), or another request holds it now."""
    try:
        current = yield GetCall(key)
    except StoreError:
        current = b"?"
    if current is None:
        LOG.warning(
            "idempotency: %s of key %s... refused: the claim expired before the answer was stored, and "
            "no other request has taken the token (a retry runs it again; raise the lease above the "
            "request time, or set renew_lease)", what, _short(key),
        )  # fmt: skip
    else:
        LOG.warning(
            "idempotency: %s of key %s... refused: the claim expired and another request took it over "
            "(raise the lease above the request time, or set renew_lease)", what, _short(key),
        )  # fmt: skip


def fenced(what: str, key: str, op: Op) -> Ops[bool]:
    """Run the fenced store write *op*; True if it was written (failures are logged, never raised)."""
    try:
        if (yield op):
            return True
        yield from refused(what, key)
    except StoreError as exc:
        LOG.warning("idempotency: %s of key %s... failed: %s", what, _short(key), exc)
    return False


def _content_lengths(headers: Iterable[tuple[str, str]]) -> list[str]:
    """The values of an answer's ``Content-Length`` lines, stripped, in their order."""
    return [value.strip() for name, value in headers if name.lower() == "content-length"]


class Answering:
    """One claimed request's answer, sans-IO: what it keeps, and the store calls that settle it.

    Both doors feed it the same facts (the status line, the headers, the body chunks) and
    run the store calls its methods yield: :class:`Exchange` on WSGI, ``apimw.asgi`` on ASGI.

    The rule (documented in ``docs/idempotency.md``): a complete answer is stored before its
    first byte is sent; an answer that goes past ``max_response_bytes``, or that cannot be
    stored (a file the server sends, ASGI ``pathsend``, ``zerocopy`` or trailers), leaves a
    tombstone before its first byte is sent; an answer that did not complete before it was
    committed (an exception, a cancellation, an ASGI app that returns without its last body
    message, a body whose length is not its ``Content-Length``) releases the claim, and the
    answer carries no ``Idempotency-Status`` (nothing is kept, the token is free again); a
    transient status, or an answer an apimw middleware made itself
    (:data:`~apimw.errors.ENVIRON_MIDDLEWARE_ANSWER`), releases the claim.
    ``replayed`` is True once the answer sent is the database guard's replay
    (:attr:`ClientToken.replayed`).
    """

    __slots__ = ("chunks", "claim", "headers", "keeping", "renewer", "replayed", "request", "settled", "size",
                 "status", "streaming", "token")  # fmt: skip

    def __init__(
        self,
        keeping: Keeping,
        renewer: Renewer | None,
        claim: Claim,
        token: ClientToken,
        request: MutableMapping[str, Any],
    ) -> None:
        self.keeping = keeping
        self.renewer = renewer
        self.claim = claim
        self.token = token
        self.request = request  # the environ or scope: the inner middlewares mark their own answers there
        self.status: str | None = None
        self.headers: list[tuple[str, str]] = []
        self.chunks: list[bytes] = []
        self.size = 0
        self.streaming = False
        self.settled = False  # the claim was completed, tombstoned or released
        self.replayed = False

    def add(self, data: bytes) -> None:
        if data:
            self.chunks.append(data)
            self.size += len(data)

    def take(self) -> list[bytes]:
        chunks, self.chunks = self.chunks, []
        return chunks

    def restart(self) -> None:
        """The app's answer is replaced (by the problem it raised): start from nothing."""
        self.status, self.headers, self.chunks, self.size = None, [], [], 0

    def too_large(self) -> bool:
        return self.size > self.keeping.max_response

    def declared_too_large(self, headers: Iterable[tuple[str, str]]) -> bool:
        """A ``Content-Length`` above ``max_response_bytes``: stream from the first byte."""
        lengths = _content_lengths(headers)
        return bool(lengths) and lengths[0].isdigit() and int(lengths[0]) > self.keeping.max_response

    def begin(self) -> None:
        """The app is about to run under the claim: renew it meanwhile (``renew_lease``)."""
        if self.renewer is not None:
            self.renewer.add(self.claim.key, self.claim.prefix)

    def unrenew(self) -> None:
        if self.renewer is not None:
            self.renewer.remove(self.claim.key, self.claim.prefix)

    def should_release(self, status: str) -> bool:
        """A transient status; an answer an apimw middleware made itself (the app did not run);
        or the database guard found the token recorded for another request (that answer is not
        the token's: it must not shadow the first request's)."""
        keeping = self.keeping
        return (
            records.releases(status, keeping.release, keeping.store_5xx)
            or self.request.get(ENVIRON_MIDDLEWARE_ANSWER) is not None
            or self.token.reused
        )

    def as_declared(self, status: str, body: bytes) -> bool:
        """Whether *body* has the length its ``Content-Length`` declares.  A server aborts an answer
        that has not (its client gets a broken answer): it did not complete, and is never stored.
        A HEAD, 204 or 304 answer sends no body of its own."""
        if self.claim.method == "HEAD" or status[:3] in ("204", "304"):
            return True
        for declared in _content_lengths(self.headers):
            if not (declared.isdigit() and int(declared) == len(body)):
                LOG.warning(
                    "idempotency: answer of key %s... declares Content-Length %r and has %d bytes: it did "
                    "not complete as declared; not stored, the claim is released", _short(self.claim.key),
                    declared, len(body),
                )  # fmt: skip
                return False
        return True

    def sent_headers(self, status: str, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The headers the client gets: a 2xx the database guard answered is marked as a replay."""
        if self.token.replayed and status[:1] == "2":
            self.replayed = True
            return [*headers, self.keeping.replayed]
        return headers

    def releasing(self) -> Ops[None]:
        if not self.settled:
            self.settled = True
            self.unrenew()
            key, prefix = self.claim.key, self.claim.prefix
            yield from fenced("release", key, ReleaseCall(key, prefix))

    def settling(self, record: bytes | None) -> Ops[bool]:
        """Complete the claim with *record*, or with a tombstone when it is None or the store refuses
        it as too large.  True when *record* itself was stored (the answer will be replayed).
        """
        assert self.status is not None  # noqa: S101 - settled only after the answer started
        self.settled = True
        self.unrenew()
        claim, retention = self.claim, self.keeping.retention
        key, prefix = claim.key, claim.prefix
        if record is not None:
            try:
                if (yield CompleteCall(key, prefix, record, retention)):
                    return True
                yield from refused("complete", key)
                return False
            except RecordTooLarge as exc:
                LOG.warning("idempotency: answer of key %s... not stored: %s; a tombstone is stored instead",
                            _short(key), exc)  # fmt: skip
            except StoreError as exc:
                LOG.warning("idempotency: complete of key %s... failed: %s", _short(key), exc)
                return False
        tombstone = records.encode_tombstone(claim.owner, claim.fp, claim.scope, self.status,
                                             records.location_of(self.headers))  # fmt: skip
        yield from fenced("tombstone", key, CompleteCall(key, prefix, tombstone, retention))
        return False

    def streaming_out(self) -> Ops[list[tuple[str, str]]]:
        """The answer goes out before it is complete (too large, or a kind that cannot be stored):
        release the claim (transient status) or leave a tombstone, so a retry never runs it again.
        The headers to send."""
        if self.status is None:
            raise RuntimeError("the application sent a body before starting its answer")
        self.streaming = True
        headers = self.headers
        if self.should_release(self.status):
            yield from self.releasing()
        elif not self.settled:
            yield from self.settling(None)
            headers = [*headers, records.NOT_STORED]
        return self.sent_headers(self.status, headers)

    def finishing(self) -> Ops[tuple[str, list[tuple[str, str]], bytes]]:
        """The whole answer is in: store it (or release the claim); the answer to send."""
        status = self.status
        if status is None:
            yield from self.releasing()
            raise RuntimeError("the application returned without starting its answer")
        body = b"".join(self.take())
        headers = self.headers
        if self.should_release(status) or not self.as_declared(status, body):
            yield from self.releasing()
        else:
            kept = records.stored_headers(self.headers, self.keeping.drop)
            claim = self.claim
            record = records.encode_complete(claim.owner, claim.fp, claim.scope, status, kept, body)
            # Stored before the first byte is sent: a client that times out and retries gets the replay.
            # Larger than max_response_bytes: a tombstone instead.
            if not (yield from self.settling(record if len(record) <= self.keeping.max_response else None)):
                headers = [*headers, records.NOT_STORED]
        return status, self.sent_headers(status, headers), body


class Exchange(Answering):
    """One claimed request on WSGI: :class:`Answering` fed by PEP 3333.

    Implements PEP 3333 towards the app (``start_response`` with ``exc_info``, the
    ``write()`` callable, lazy ``start_response``) and calls the app iterable's
    ``close()`` exactly once on every path.
    """

    __slots__ = ("app", "environ", "real_start_response", "real_write", "store")

    def __init__(
        self,
        app: WSGIApplication,
        store: Store,
        renewer: Renewer | None,
        keeping: Keeping,
        environ: WSGIEnvironment,
        start_response: StartResponse,
        claim: Claim,
        token: ClientToken,
    ) -> None:
        super().__init__(keeping, renewer, claim, token, environ)
        self.app = app
        self.store = store
        self.environ = environ
        self.real_start_response = start_response
        self.real_write: Callable[[bytes], object] | None = None

    # the start_response and write() the app sees
    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
    ) -> Callable[[bytes], object]:
        if exc_info is not None and exc_info[0] is not None:
            try:
                if self.streaming:  # our headers went to the server: it decides (and re-raises if sent)
                    return self.real_start_response(status, headers, exc_info)
            finally:
                exc_info = None  # no traceback cycle
        elif self.status is not None:
            raise RuntimeError("start_response called a second time without exc_info (PEP 3333)")
        self.status, self.headers = status, list(headers)
        if not self.streaming and self.declared_too_large(headers):
            self.go_streaming()
        return self.write

    def write(self, data: bytes) -> None:
        if self.streaming:
            assert self.real_write is not None  # noqa: S101
            self.real_write(data)
            return
        self.add(data)
        if self.too_large():
            self.go_streaming()
            assert self.real_write is not None  # noqa: S101
            for chunk in self.take():
                self.real_write(chunk)

    def release(self) -> None:
        run_ops(self.releasing(), self.store)

    def go_streaming(self) -> None:
        """Too large (or a file) to store: leave a tombstone so a retry never runs it again."""
        assert self.status is not None  # noqa: S101 - start_response was called (or it raises)
        headers = run_ops(self.streaming_out(), self.store)
        self.real_write = self.real_start_response(self.status, headers)

    def run(self) -> Iterable[bytes]:
        self.begin()
        try:
            try:
                result = self.app(self.environ, self.start_response)
            except HTTPProblem as problem:
                if self.streaming:
                    raise
                # a deliberate error answer from the app: rendered here, the app's answer (stored)
                self.restart()
                result = respond_with_problem(
                    self.environ, self.start_response, problem, profile=self.keeping.profile
                )
                self.environ.pop(ENVIRON_MIDDLEWARE_ANSWER, None)
        except BaseException:
            if not self.streaming:
                self.release()
            raise
        wrapper = self.environ.get("wsgi.file_wrapper")
        try:
            if isinstance(wrapper, type) and isinstance(result, wrapper) and self.status is not None:
                if not self.streaming:
                    self.go_streaming()
                return result  # the server may send the file itself
            iterator = iter(result)
            if not self.streaming:
                for chunk in iterator:
                    self.add(chunk)
                    if self.too_large():
                        self.go_streaming()
                        break
            if self.streaming:
                return _wsgi.ClosingIterable(self.take(), iterator, result)
        except BaseException:
            if not self.streaming:
                self.release()
            _wsgi.close(result)
            raise
        try:
            _wsgi.close(result)
        except BaseException:
            self.release()
            raise
        return self.finish()

    def finish(self) -> list[bytes]:
        status, headers, body = run_ops(self.finishing(), self.store)
        self.real_start_response(status, headers)
        return [body] if body else []
