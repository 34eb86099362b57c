"""``memcached://host:port[,host:port...]``: records in memcached through pymemcache.

* Claim: ``add`` (never ``noreply``: pymemcache's default ``noreply=True``
  would make every ``add`` look successful) pipelined with a ``gets``, so one
  round trip either creates the record (and yields its cas token) or returns
  the record already there.  After an error the ``add`` may or
  may not have been stored, so the record is read back instead of blindly
  retrying: the caller recognises its own owner id.
* Fenced complete/release: ``cas`` with the claim's token (``gets`` first when
  the token is not known); release is a ``cas`` to an empty value with a
  negative exptime ("immediately expired").
* TTLs are whole seconds, at least 2 (memcached's clock ticks once a second, so
  a TTL of 1 may expire at once); more than 30 days is sent as an absolute Unix
  time, because memcached reads larger values that way.

Several servers: each key is placed on one server by rendezvous hashing of the
key over the server list (the same in every process).  When that server is
down, requests for its keys fail with :class:`~apimw.errors.StoreError` (the
middleware answers 503, or runs unprotected in fail-open mode); keys are never
moved to another server, because a moved key has forgotten its in-flight claim
and its stored response and a retry would run twice.  Keys of the other servers
are unaffected.  memcached is not durable: a restarted server has forgotten its
records, and it may evict records under memory pressure (run a dedicated
instance, or ``-M``).  URL parameters: ``timeout``, ``connect_timeout`` (seconds),
``max_pool_size``.

The two commands of every protected request -- the claim (``add`` and ``gets``
pipelined in one write) and the completion ``cas`` with the remembered token --
go over sockets of the store's own (TCP_NODELAY, the same timeouts), with the
replies parsed here: pymemcache's pool checkout and command machinery cost a
third of a loopback round trip.  A reused socket that turns out closed (the
server restarted) is replaced and the command sent once more on a fresh one.
Every other command goes through pymemcache's public API.
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import struct
import sys
import threading
import time
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from pymemcache.client.base import PooledClient
from pymemcache.exceptions import MemcacheError, MemcacheUnexpectedCloseError

from apimw._stores import PREFIX_LEN, RecordTooLarge, mask_url
from apimw.errors import ConfigError, StoreError

#: memcached reads an exptime above this as an absolute Unix time.
THIRTY_DAYS: Final = 30 * 24 * 3600
MIN_TTL: Final = 2
#: cas tokens remembered for our own claims (older ones fall back to gets + cas).
MAX_REMEMBERED: Final = 10_000
_ERRORS: Final = (MemcacheError, OSError)
#: Linux: socket timeouts as SO_RCVTIMEO/SO_SNDTIMEO on a blocking socket (see _new_socket).
_KERNEL_TIMEOUTS: Final = sys.platform.startswith("linux")


def memcached_expire(seconds: float, *, now: float | None = None) -> int:
    """The exptime to send for a TTL of *seconds*: >= 2, absolute time beyond 30 days."""
    ttl = max(MIN_TTL, math.ceil(seconds))
    if ttl > THIRTY_DAYS:
        return int(time.time() if now is None else now) + ttl
    return ttl


class _Reader:
    """Read memcached answers (lines and exact-size values) from a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.got = False  # any reply byte arrived

    def _more(self) -> None:
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:  # SO_RCVTIMEO passed
            raise TimeoutError("memcached store: read timed out") from None
        if not data:
            raise MemcacheUnexpectedCloseError("connection closed")
        self.got = True
        self.buf += data

    def line(self) -> bytes:
        while (end := self.buf.find(b"\r\n")) < 0:
            self._more()
        line, self.buf = self.buf[:end], self.buf[end + 2 :]
        return line

    def exact(self, size: int) -> bytes:
        while len(self.buf) < size:
            self._more()
        data, self.buf = self.buf[:size], self.buf[size:]
        return data


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
    """One pymemcache ``PooledClient`` per server; a key always goes to the same server."""

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
        #: the socket timeout (seconds) of every command
        self.timeout = timeout
        self._kwargs: dict[str, Any] = {
            "timeout": timeout,
            "connect_timeout": connect_timeout if connect_timeout is not None else timeout,
            "max_pool_size": max_pool_size,
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
        """Ask every server for its settings once (on a fresh socket); raise :class:`StoreError` if one fails.

        Sets :attr:`item_size_max` to the smallest ``item_size_max`` the servers report.
        """
        sizes = []
        for client in self._clients:
            host, port = client.server
            where = f"{self.name}: {host}:{port}"
            try:
                sock = self._new_socket(client)
            except OSError as exc:
                raise StoreError(f"{where} cannot be reached: {type(exc).__name__}: {exc}") from exc
            try:
                sock.sendall(b"stats settings\r\n")
                reader = _Reader(sock)
                while (line := reader.line()) != b"END":
                    fields = line.split()
                    if len(fields) == 3 and fields[:2] == [b"STAT", b"item_size_max"] and fields[2].isdigit():
                        sizes.append(int(fields[2]))
                    elif not line.startswith(b"STAT "):
                        raise MemcacheUnexpectedCloseError(f"stats answered {line[:60]!r}")
            except (*_ERRORS, ValueError) as exc:
                raise StoreError(f"{where} did not answer: {type(exc).__name__}: {exc}") from exc
            finally:
                sock.close()
        if sizes:
            self.item_size_max = min(sizes)

    def _connect(self) -> None:
        self._pid = os.getpid()
        self._clients = [PooledClient(server, **self._kwargs) for server in self.servers]
        self._socks: dict[PooledClient, list[socket.socket]] = {c: [] for c in self._clients}

    def _new_socket(self, client: PooledClient) -> socket.socket:
        sock = socket.create_connection(client.server, timeout=self._kwargs["connect_timeout"])
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            timeout = self._kwargs["timeout"]
            if _KERNEL_TIMEOUTS:
                # The kernel enforces the timeout on each send/recv (EAGAIN when it passes): no
                # poll() before every call, as Python's own socket timeout does.
                sec = int(timeout)
                timeval = struct.pack("@ll", sec, int((timeout - sec) * 1_000_000))
                sock.settimeout(None)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
            else:
                sock.settimeout(timeout)
        except BaseException:
            sock.close()
            raise
        return sock

    def _roundtrip(self, client: PooledClient, command: bytes, parse: Any) -> Any:
        """Send *command* on one of our sockets to *client*'s server; ``parse(reader)`` reads the reply.

        A reused socket found closed (a restarted server never saw the command) is
        replaced by a fresh one, once; any other failure closes the socket and raises.
        """
        idle = self._socks[client]
        for attempt in (0, 1):
            try:
                sock = idle.pop()
                reused = True
            except IndexError:
                sock = self._new_socket(client)
                reused = False
            reader = _Reader(sock)
            try:
                try:
                    sock.sendall(command)
                except BlockingIOError:  # SO_SNDTIMEO passed
                    raise TimeoutError("memcached store: write timed out") from None
                result = parse(reader)
            except (MemcacheUnexpectedCloseError, ConnectionError) as exc:
                sock.close()
                if attempt or not reused or (isinstance(exc, MemcacheUnexpectedCloseError) and reader.got):
                    raise
                continue
            except BaseException:
                sock.close()
                raise
            if reader.buf:  # more than one reply: out of step with the server
                sock.close()
                raise MemcacheUnexpectedCloseError("unexpected data after the reply")
            idle.append(sock)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _client(self, key: str) -> PooledClient:
        if self._pid != os.getpid():  # forked: never share sockets with the parent
            self._connect()
        clients = self._clients
        if len(clients) == 1:
            return clients[0]
        raw = key.encode()
        best = max(
            range(len(clients)),
            key=lambda i: hashlib.blake2b(self._labels[i] + b"\0" + raw, digest_size=8).digest(),
        )
        return clients[best]

    def _fail(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"{self.name}: {what} failed: {type(exc).__name__}: {exc}")

    def _read(self, client: PooledClient, key: str) -> bytes | None:
        # A read is safe to repeat once: a pooled socket that died with a server
        # restart fails the first time and is replaced by a fresh connection.  A read
        # that timed out is not repeated: the server is there but does not answer, and
        # a second wait would double the time a request waits for its 503.
        for attempt in (0, 1):
            try:
                value = client.get(key)
            except _ERRORS as exc:
                if attempt or not _closed(exc):
                    raise self._fail("get", exc) from exc
                continue
            return None if value is None else bytes(value)
        raise AssertionError("unreachable")  # pragma: no cover

    def _remember(self, key: str, prefix: bytes, cas: bytes) -> None:
        with self._lock:
            self._cas[(key, prefix)] = cas
            while len(self._cas) > MAX_REMEMBERED:
                del self._cas[next(iter(self._cas))]

    def _recall(self, key: str, expect: bytes) -> bytes | None:
        with self._lock:
            return self._cas.pop((key, expect[:PREFIX_LEN]), None)

    def _add_gets(self, client: PooledClient, key: str, value: bytes, expire: int) -> bytes | None:
        """``add`` and ``gets`` pipelined in one round trip; remembers our cas token when we won.

        Returns ``None`` if the add stored *value*, else the record there (``b""`` if none).
        """
        bkey = key.encode("ascii")
        command = b"add %b 0 %d %d\r\n%b\r\ngets %b\r\n" % (bkey, expire, len(value), value, bkey)

        def parse(reader: _Reader) -> tuple[bytes, bytes | None, bytes | None]:
            reader._more()
            buf = reader.buf
            if buf.endswith(b"END\r\n"):  # usually the whole reply comes in one piece: parse it at once
                head = buf.find(b"\r\n")
                stored = buf[:head]
                if stored == b"STORED" or stored == b"NOT_STORED":
                    if len(buf) == head + 7:  # nothing there
                        reader.buf = b""
                        return stored, None, None
                    end = buf.find(b"\r\n", head + 2)
                    fields = buf[head + 2 : end].split()
                    if len(fields) == 5 and fields[:2] == [b"VALUE", bkey] and fields[3].isdigit():
                        size = int(fields[3])
                        if len(buf) == end + size + 9 and buf[end + 2 + size :] == b"\r\nEND\r\n":
                            reader.buf = b""
                            return stored, buf[end + 2 : end + 2 + size], fields[4]
            stored = reader.line()
            if stored not in (b"STORED", b"NOT_STORED"):
                raise MemcacheUnexpectedCloseError(f"add answered {stored[:60]!r}")
            line = reader.line()
            current = cas = None
            if line.startswith(b"VALUE "):
                fields = line.split()
                if len(fields) != 5 or fields[1] != bkey:
                    raise MemcacheUnexpectedCloseError(f"gets answered {line[:60]!r}")
                current = reader.exact(int(fields[3]))
                cas = fields[4]
                if reader.exact(2) != b"\r\n":
                    raise MemcacheUnexpectedCloseError("value not terminated")
                line = reader.line()
            if line != b"END":
                raise MemcacheUnexpectedCloseError(f"gets answered {line[:60]!r}")
            return stored, current, cas

        stored, current, cas = self._roundtrip(client, command, parse)
        if stored == b"STORED":
            if current is not None and cas is not None and current[:PREFIX_LEN] == value[:PREFIX_LEN]:
                self._remember(key, value[:PREFIX_LEN], cas)
            return None
        return b"" if current is None else current

    def _cas_write(self, client: PooledClient, key: str, value: bytes, cas: bytes, expire: int) -> bool:
        """``cas`` on our own socket: True if stored, False if the record changed or vanished."""
        command = b"cas %b 0 %d %d %b\r\n%b\r\n" % (key.encode("ascii"), expire, len(value), cas, value)

        def parse(reader: _Reader) -> bool:
            line = reader.line()
            if line == b"STORED":
                return True
            if line in (b"EXISTS", b"NOT_FOUND"):
                return False
            if line.startswith(b"SERVER_ERROR object too large"):  # over the server's -I item size
                raise RecordTooLarge(
                    f"{self.name}: the server refused a record of {len(value)} bytes (item size limit)"
                )
            raise MemcacheUnexpectedCloseError(f"cas answered {line[:60]!r}")

        try:
            return bool(self._roundtrip(client, command, parse))
        except (*_ERRORS, ValueError) as exc:
            raise self._fail("cas", exc) from exc

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        client = self._client(key)
        expire = memcached_expire(lease)
        try:
            return self._add_gets(client, key, value, expire)
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
        current = self._read(client, key)
        return b"" if current is None else current

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

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        client = self._client(key)
        cas = self._recall(key, expect)
        if cas is None:
            current, cas = self._gets(client, key)
            if current is None or not current.startswith(expect):
                return False
        # the cas token is this claim's: if anyone replaced the record since, cas fails
        return self._cas_write(client, key, value, _cas_token(cas), memcached_expire(ttl))

    def release(self, key: str, expect: bytes) -> bool:
        client = self._client(key)
        cas = self._recall(key, expect)
        if cas is None:
            current, cas = self._gets(client, key)
            if current is None or not current.startswith(expect):
                return False
        # exptime < 0: "the item is immediately expired" -> a compare-and-delete.
        return self._cas_write(client, key, b"", _cas_token(cas), -1)

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        client = self._client(key)
        self._recall(key, expect)  # the cas below changes the token: complete will gets again
        current, cas = self._gets(client, key)
        if current is None or not current.startswith(expect):
            return False
        try:
            # ``touch`` cannot be fenced; a cas of the same value with a new exptime can
            return bool(client.cas(key, current, cas, expire=memcached_expire(lease), noreply=False))
        except _ERRORS as exc:
            raise self._fail("cas", exc) from exc

    def get(self, key: str) -> bytes | None:
        return self._read(self._client(key), key)

    def server_for(self, key: str) -> tuple[str, int]:
        """The server that holds *key* (for operators and tests)."""
        return self.servers[self._clients.index(self._client(key))]

    def close(self) -> None:
        for client in self._clients:
            for sock in self._socks[client]:
                sock.close()
            self._socks[client] = []
            client.close()
