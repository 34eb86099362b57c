"""``memcached://host:port[,host:port...]``: records in memcached through pymemcache.

Every command goes through pymemcache's public client API, one ``PooledClient``
per server:

* Claim: a meta ``ms`` in add mode that returns the new item's cas token
  (``ms <key> <size> T<lease> c ME``, sent with ``raw_command``): one round trip
  creates the record and remembers its token.  When the key is taken the record
  there is read with ``gets`` (a second round trip: memcached has no "add or
  return the current value" command).  After an error the ``add`` may or may not
  have been stored, so the record is read back instead of blindly retrying: the
  caller recognises its own owner id.
* Fenced complete/release: ``cas`` with the claim's token (``gets`` first when
  the token is not known); release is a ``cas`` to an empty value with a
  negative exptime ("immediately expired").
* TTLs are whole seconds, at least 2 (memcached's clock ticks once a second, so
  a TTL of 1 may expire at once); more than 30 days is sent as an absolute Unix
  time, because memcached reads larger values that way.

Several servers: each key is placed on one server by rendezvous hashing of the
key over the server list (the same in every process and every release).  When
that server is down, requests for its keys fail with
:class:`~apimw.errors.StoreError` (the middleware answers 503, or runs
unprotected in fail-open mode); keys are never moved to another server, because
a moved key has forgotten its in-flight claim and its stored response and a
retry would run twice.  (pymemcache's ``HashClient`` does move them: it drops a
failing server from its ring and answers "absent" while it retries one, so it is
not used.)  Keys of the other servers are unaffected.  memcached is not durable:
a restarted server has forgotten its records, and it may evict records under
memory pressure (run a dedicated instance, or ``-M``).

URL options (``memcached://h:11211?max_pool_size=16&timeout=0.5``):

``max_pool_size``
    Connections per server (default :data:`DEFAULT_MAX_POOL_SIZE`).  A call that
    finds them all busy waits up to ``timeout`` seconds for one, then fails
    (503 upstream).
``timeout``
    Seconds each command may take (default: the store timeout).
``connect_timeout``
    Seconds a connection may take to open (default: ``timeout``).
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from pymemcache.client.base import PooledClient
from pymemcache.exceptions import MemcacheError, MemcacheServerError, MemcacheUnexpectedCloseError

from apimw._stores.base import PREFIX_LEN, RecordTooLarge, mask_url
from apimw.errors import ConfigError, StoreError

#: memcached reads an exptime above this as an absolute Unix time.
THIRTY_DAYS: Final = 30 * 24 * 3600
MIN_TTL: Final = 2
#: cas tokens remembered for our own claims (older ones fall back to gets + cas).
MAX_REMEMBERED: Final = 10_000
#: Connections per server unless the URL's ``max_pool_size`` says otherwise.
DEFAULT_MAX_POOL_SIZE: Final = 50
_ERRORS: Final = (MemcacheError, OSError)


def memcached_expire(seconds: float, *, now: float | None = None) -> int:
    """The exptime to send for a TTL of *seconds*: >= 2, absolute time beyond 30 days."""
    ttl = max(MIN_TTL, math.ceil(seconds))
    if ttl > THIRTY_DAYS:
        return int(time.time() if now is None else now) + ttl
    return ttl


def _closed(exc: BaseException) -> bool:
    """Whether *exc* says the connection was closed or refused (worth one retry on a fresh
    one), not that the server let a timeout pass."""
    return isinstance(exc, (MemcacheUnexpectedCloseError, ConnectionError))


def _cas_token(cas: Any) -> bytes:
    """pymemcache gives cas tokens as bytes (or int); the wire wants the digits."""
    token = cas if isinstance(cas, bytes) else str(cas).encode("ascii")
    if not token.isdigit():
        raise StoreError(f"memcached store: bad cas token {token[:30]!r}")
    return token


def _parse_server(text: str, url: str) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):  # [::1]:11211
        host, _, rest = text[1:].partition("]")
        port_text = rest.lstrip(":") or "11211"
    else:
        host, _, port_text = text.partition(":")
        port_text = port_text or "11211"
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(
            f"memcached store: bad server {mask_url(text)!r} in {mask_url(url)!r} (expected host:port)"
        )
    return host, int(port_text)


class MemcachedStore:
    """One pymemcache ``PooledClient`` per server; a key always goes to the same server.

    *servers*: ``(host, port)`` pairs.  *timeout* / *connect_timeout*: seconds per
    command / per connect.  *max_pool_size*: connections per server (default
    :data:`DEFAULT_MAX_POOL_SIZE`); a call that finds them all busy waits up to
    *timeout* for one, then raises :class:`StoreError`.  :meth:`from_url` reads the
    same options from a ``memcached://`` URL.
    """

    def __init__(
        self,
        servers: list[tuple[str, int]],
        *,
        timeout: float = 0.5,
        connect_timeout: float | None = None,
        max_pool_size: int | None = None,
    ) -> None:
        if not servers:
            raise ConfigError("memcached store: at least one server is needed")
        self.servers = servers
        self.name = "memcached://" + ",".join(f"{h}:{p}" for h, p in servers)
        #: the socket timeout (seconds) of every command, and the longest wait for a free connection
        self.timeout = timeout
        #: connections per server
        self.max_pool_size = max_pool_size or DEFAULT_MAX_POOL_SIZE
        #: connections the store may hold in all (``max_pool_size`` per server)
        self.max_connections = self.max_pool_size * len(servers)
        self._kwargs: dict[str, Any] = {
            "timeout": timeout,
            "connect_timeout": connect_timeout if connect_timeout is not None else timeout,
            "max_pool_size": self.max_pool_size,
            "no_delay": True,
            "default_noreply": False,
            "ignore_exc": False,
        }
        self._labels = [f"{h}:{p}".encode() for h, p in servers]
        # cas tokens of our own live claims, so completing one is a single cas round trip
        self._cas: dict[tuple[str, bytes], bytes] = {}
        self._lock = threading.Lock()
        #: the smallest item size the servers accept (``-I``), learnt by :meth:`ping`; memcached's default
        self.item_size_max = 1024 * 1024
        self._connect()

    @classmethod
    def from_url(cls, url: str, *, timeout: float = 0.5) -> MemcachedStore:
        """The store of a ``memcached://`` URL; *timeout* is the default of its ``timeout``."""
        parts = urlsplit(url)
        if parts.path not in ("", "/"):
            raise ConfigError(f"memcached store: unexpected path in {mask_url(url)!r}")
        servers = [_parse_server(s, url) for s in parts.netloc.split(",") if s.strip()]
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = set(params) - {"timeout", "connect_timeout", "max_pool_size"}
        if unknown:
            raise ConfigError(
                f"memcached store: unknown URL parameter(s) {sorted(unknown)} in {mask_url(url)!r}"
            )
        try:
            tmo = float(params.get("timeout", timeout))
            ctmo = float(params["connect_timeout"]) if "connect_timeout" in params else None
            pool = int(params["max_pool_size"]) if "max_pool_size" in params else None
        except ValueError:
            raise ConfigError(f"memcached store: bad numeric URL parameter in {mask_url(url)!r}") from None
        if tmo <= 0 or (ctmo is not None and ctmo <= 0) or (pool is not None and pool < 1):
            raise ConfigError(
                f"memcached store: timeouts and max_pool_size must be positive in {mask_url(url)!r}"
            )
        return cls(servers, timeout=tmo, connect_timeout=ctmo, max_pool_size=pool)

    def __repr__(self) -> str:
        return f"<MemcachedStore {self.name}>"

    def ping(self) -> None:
        """Ask every server for its settings; raise :class:`StoreError` if one fails.

        Sets :attr:`item_size_max` to the smallest ``item_size_max`` the servers report.
        """
        sizes = []
        for index, client in enumerate(self._clients):
            host, port = client.server
            try:
                with self._connection(index):
                    settings = client.stats("settings")
            except _ERRORS as exc:
                raise StoreError(
                    f"{self.name}: {host}:{port} did not answer: {type(exc).__name__}: {exc}"
                ) from exc
            size = settings.get(b"item_size_max")
            if isinstance(size, bytes) and size.isdigit():
                size = int(size)
            if isinstance(size, int):
                sizes.append(size)
        if sizes:
            self.item_size_max = min(sizes)

    def _connect(self) -> None:
        self._pid = os.getpid()
        self._clients = [PooledClient(server, **self._kwargs) for server in self.servers]
        self._free = [threading.BoundedSemaphore(self.max_pool_size) for _ in self.servers]

    @contextmanager
    def _connection(self, index: int) -> Iterator[None]:
        """Hold one of server *index*'s ``max_pool_size`` connections (pymemcache's pool refuses,
        rather than waits, past its size); :class:`StoreError` after :attr:`timeout` seconds."""
        free = self._free[index]
        if not free.acquire(timeout=self.timeout):
            raise StoreError(
                f"{self.name}: all {self.max_pool_size} connections to {self.servers[index][0]}:"
                f"{self.servers[index][1]} stayed busy for {self.timeout:g} s (max_pool_size)"
            )
        try:
            yield
        finally:
            free.release()

    def _server(self, key: str) -> int:
        if self._pid != os.getpid():  # forked: never share sockets with the parent
            self._connect()
        if len(self._clients) == 1:
            return 0
        raw = key.encode()
        return max(
            range(len(self._clients)),
            key=lambda i: hashlib.blake2b(self._labels[i] + b"\0" + raw, digest_size=8).digest(),
        )

    def _fail(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"{self.name}: {what} failed: {type(exc).__name__}: {exc}")

    def _read(self, client: PooledClient, key: str) -> bytes | None:
        # A read is safe to repeat once: a pooled connection that died with a server
        # restart fails the first time and is replaced by a fresh one.  A read that
        # timed out is not repeated: the server is there but does not answer, and a
        # second wait would double the time a request waits for its 503.
        for attempt in (0, 1):
            try:
                value = client.get(key)
            except _ERRORS as exc:
                if attempt or not _closed(exc):
                    raise self._fail("get", exc) from exc
                continue
            return None if value is None else bytes(value)
        raise AssertionError("unreachable")  # pragma: no cover

    def _gets(self, client: PooledClient, key: str) -> tuple[bytes | None, Any]:
        for attempt in (0, 1):
            try:
                value, cas = client.gets(key)
            except _ERRORS as exc:
                if attempt or not _closed(exc):
                    raise self._fail("gets", exc) from exc
                continue
            return (None if value is None else bytes(value)), cas
        raise AssertionError("unreachable")  # pragma: no cover

    def _remember(self, key: str, prefix: bytes, cas: bytes) -> None:
        with self._lock:
            self._cas[(key, prefix)] = cas
            while len(self._cas) > MAX_REMEMBERED:
                del self._cas[next(iter(self._cas))]

    def _recall(self, key: str, expect: bytes) -> bytes | None:
        with self._lock:
            return self._cas.pop((key, expect[:PREFIX_LEN]), None)

    def _claim_cas(self, client: PooledClient, key: str, expect: bytes) -> Any:
        """The cas token of the claim whose record starts with *expect*: the one its claim
        left, else the record's own if it is still that claim's; ``None`` when it is not."""
        cas = self._recall(key, expect)
        if cas is None:
            current, cas = self._gets(client, key)
            if current is None or not current.startswith(expect):
                return None
        return cas

    def _add(self, client: PooledClient, key: str, value: bytes, expire: int) -> bytes | None:
        """Meta ``ms`` in add mode: the cas token of the new record, or ``None`` if the key is taken."""
        reply = client.raw_command(
            b"ms %b %d T%d c ME\r\n%b" % (key.encode("ascii"), len(value), expire, value)
        )
        status, *flags = reply.split()
        if status == b"NS":
            return None
        cas = next((flag[1:] for flag in flags if flag.startswith(b"c")), b"")
        if status != b"HD" or not cas.isdigit():
            raise MemcacheUnexpectedCloseError(f"ms answered {reply[:60]!r}")
        return cas

    def _cas_write(self, client: PooledClient, key: str, value: bytes, cas: bytes, expire: int) -> bool:
        """``cas``: True if stored, False if the record changed or vanished."""
        try:
            return bool(client.cas(key, value, cas, expire=expire, noreply=False))
        except MemcacheServerError as exc:
            if b"too large" in str(exc).encode():  # over the server's -I item size
                raise RecordTooLarge(
                    f"{self.name}: the server refused a record of {len(value)} bytes (item size limit)"
                ) from exc
            raise self._fail("cas", exc) from exc
        except _ERRORS as exc:
            raise self._fail("cas", exc) from exc

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        index = self._server(key)
        client = self._clients[index]
        expire = memcached_expire(lease)
        with self._connection(index):
            try:
                cas = self._add(client, key, value, expire)
            except (*_ERRORS, ValueError):
                # Stored or not?  Read back; never blindly re-add.
                current = self._read(client, key)
                if current is not None:
                    return current
                try:
                    if client.add(key, value, expire=expire, noreply=False):
                        return None
                except _ERRORS as exc:
                    raise self._fail("add", exc) from exc
            else:
                if cas is not None:
                    self._remember(key, value[:PREFIX_LEN], cas)
                    return None
            current = self._read(client, key)
        return b"" if current is None else current

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        index = self._server(key)
        client = self._clients[index]
        with self._connection(index):
            cas = self._claim_cas(client, key, expect)
            if cas is None:
                return False
            # the cas token is this claim's: if anyone replaced the record since, cas fails
            return self._cas_write(client, key, value, _cas_token(cas), memcached_expire(ttl))

    def release(self, key: str, expect: bytes) -> bool:
        index = self._server(key)
        client = self._clients[index]
        with self._connection(index):
            cas = self._claim_cas(client, key, expect)
            if cas is None:
                return False
            # exptime < 0: "the item is immediately expired" -> a compare-and-delete.
            return self._cas_write(client, key, b"", _cas_token(cas), -1)

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        index = self._server(key)
        client = self._clients[index]
        with self._connection(index):
            self._recall(key, expect)  # the cas below changes the token: complete will gets again
            current, cas = self._gets(client, key)
            if current is None or not current.startswith(expect):
                return False
            # ``touch`` cannot be fenced; a cas of the same value with a new exptime can
            return self._cas_write(client, key, current, _cas_token(cas), memcached_expire(lease))

    def get(self, key: str) -> bytes | None:
        index = self._server(key)
        with self._connection(index):
            return self._read(self._clients[index], key)

    def server_for(self, key: str) -> tuple[str, int]:
        """The server that holds *key* (for operators and tests)."""
        return self.servers[self._server(key)]

    def close(self) -> None:
        """Close every pooled connection (the store reconnects if used again)."""
        for client in self._clients:
            client.close()
