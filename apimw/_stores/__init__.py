"""Replay stores for the idempotency middleware: one record per key, claimed atomically.

A store keeps opaque byte records under short ASCII keys.  The middleware puts
its owner id and record state in the first :data:`PREFIX_LEN` bytes of every
record, so a store can *fence* a write: "replace/delete this key only if its
record still starts with these bytes" (memcached ``gets``/``cas``, a Redis Lua
script, a lock in memory).  A request whose lease expired can therefore never
overwrite or delete the record of the request that took over.

Backends are chosen by URL (:func:`open_store`):

``memory://`` / ``memory://<name>``
    One process only (tests, single-process services).  A named store is shared
    by every middleware in the process that names it.
``memcached://host:port[,host:port...]``
    pymemcache; each key lives on exactly one server (rendezvous hashing) and
    is never moved to another one when its server is down.
``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://``, ``redis+sentinel://``
    redis-py; every record is a single key, so Redis Cluster needs no hash tags.

Every store method raises :class:`~apimw.errors.StoreError` when the backend
cannot be reached or answers nonsense; none of them raises anything else.
"""

from __future__ import annotations

import re
from typing import Final, Protocol
from urllib.parse import urlsplit

from apimw.errors import ConfigError, StoreError, explain_missing

__all__ = [
    "PENDING_STATE",
    "PREFIX_LEN",
    "RecordTooLarge",
    "Store",
    "StoreError",
    "display_url",
    "mask_url",
    "open_store",
]

#: Bytes at the start of a record that fenced writes compare: 32 hex owner id + 1 state byte.
PREFIX_LEN: Final = 33
#: The state byte (``record[PREFIX_LEN - 1]``) of an in-flight claim, which a store never evicts.
PENDING_STATE: Final = b"P"

#: Query parameters whose values are secrets (``redis://h?password=...``).
_SECRET_PARAM: Final = re.compile(
    r"([?&][^=&#]*(?:pass|secret|token|auth|cred)[^=&#]*=)[^&#]*", re.IGNORECASE
)


class RecordTooLarge(StoreError):
    """The store cannot hold a record this large (memcached's item size, memory:// max_bytes).

    Nothing was written: the record that was there (the caller's claim) is unchanged.
    """


def mask_url(url: str) -> str:
    """*url* with its password (and any password-like query parameter) replaced by ``***``.

    Used in every message that echoes a store URL: logs, errors, ``repr``.  Errs on
    the side of masking: everything between ``://`` and the last ``@`` is credentials.
    """
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return "***" if "@" in text else text
    if "@" in rest:
        userinfo, _, hosts = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        # "redis://user:pw@h" keeps the user name; a bare "redis://secret@h" may be a password
        userinfo = f"{user}:***" if colon and "/" not in user else "***"
        rest = f"{userinfo}@{hosts}"
    return scheme + sep + _SECRET_PARAM.sub(r"\1***", rest)


def display_url(url: str) -> str:
    """*url* for logs and ``Store.name``: no credentials and no query (``redis://h:6379/0``)."""
    scheme, sep, rest = str(url).partition("://")
    rest = rest.partition("?")[0].partition("#")[0]
    if not sep:
        return mask_url(url)
    return scheme + sep + rest.rpartition("@")[2]


class Store(Protocol):
    """What the idempotency middleware needs from a backend."""

    #: Short description for logs (no credentials).
    name: str

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        """Store *value* under *key* for *lease* seconds if *key* is absent.

        Return ``None`` when this call created the record, else the record that is
        there (``b""`` if it vanished between the failed create and the read).
        """

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        """Replace the record with *value* for *ttl* seconds if it still starts with *expect*."""

    def release(self, key: str, expect: bytes) -> bool:
        """Delete the record if it still starts with *expect*."""

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        """Give the record *lease* more seconds if it still starts with *expect*."""

    def get(self, key: str) -> bytes | None:
        """The record under *key*, or ``None``."""

    def close(self) -> None:
        """Drop connections (the store may be used again afterwards)."""


def open_store(url: str, *, timeout: float = 0.5) -> Store:
    """A store for *url*; *timeout* (seconds) is the default of the URL's timeouts.

    URL options (defaults in brackets):

    ``memory://[<name>]?max_items=&max_bytes=``
        Records [100000] and bytes [64 MiB] held at most; when full, the tenant
        holding the largest share gives up its oldest completed record.
    ``memcached://host:port[,host:port...]?max_pool_size=&timeout=&connect_timeout=``
        Connections per server [50]; a call that finds them all busy waits up to
        ``timeout`` for one, then fails.  Seconds per command [*timeout*] and per
        connect [``timeout``].
    ``redis://``, ``rediss://``, ``unix://`` ``?max_connections=&timeout=&socket_timeout=``
        Anything ``redis.BlockingConnectionPool.from_url`` reads: connections [50];
        the wait for a free one [*timeout*]; ``socket_timeout`` and
        ``socket_connect_timeout`` [*timeout*].
    ``redis+cluster://host:port[,...]``, ``redis+sentinel://host:port[,...]/<service>[/<db>]``
        ``?max_connections=`` [50, per node] and the two socket timeouts [*timeout*].

    Raises :class:`~apimw.errors.ConfigError` for an unknown scheme or a malformed URL.
    No connection is made here: the first request connects.
    """
    if not isinstance(url, str) or "://" not in url:
        shown = mask_url(url) if isinstance(url, str) else type(url).__name__
        raise ConfigError(f"store must be a URL such as memory://, redis://host:6379/0; got {shown!r}")
    scheme = urlsplit(url).scheme.lower()
    if scheme == "memory":
        from apimw._stores.memory_store import open_memory_store

        return open_memory_store(url)
    if scheme == "memcached":
        try:
            from apimw._stores.memcached_store import MemcachedStore
        except ImportError as exc:
            explain_missing(exc, "memcached://", module="pymemcache", library="pymemcache", extra="memcached")
            raise
        return MemcachedStore.from_url(url, timeout=timeout)
    if scheme in ("redis", "rediss", "unix", "redis+cluster", "redis+sentinel"):
        try:
            from apimw._stores.redis_store import open_redis_store
        except ImportError as exc:
            explain_missing(exc, f"{scheme}://", module="redis", library="redis", extra="redis")
            raise
        return open_redis_store(url, timeout=timeout)
    raise ConfigError(
        f"unknown store scheme {scheme!r} in {mask_url(url)!r}: use memory://, memcached://, redis://, "
        "rediss://, unix://, redis+cluster:// or redis+sentinel://"
    )
