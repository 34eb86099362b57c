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

from urllib.parse import urlsplit

from apimw._stores.base import PENDING_STATE, PREFIX_LEN, RecordTooLarge, Store, display_url, mask_url
from apimw._stores.memory_store import open_memory_store
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
        return open_memory_store(url)
    if scheme == "memcached":
        try:
            from apimw._stores.memcached_store import MemcachedStore  # extra "memcached": pymemcache
        except ImportError as exc:
            explain_missing(exc, "memcached://", module="pymemcache", library="pymemcache", extra="memcached")
            raise
        return MemcachedStore.from_url(url, timeout=timeout)
    if scheme in ("redis", "rediss", "unix", "redis+cluster", "redis+sentinel"):
        try:
            from apimw._stores.redis_store import open_redis_store  # extra "redis": redis-py
        except ImportError as exc:
            explain_missing(exc, f"{scheme}://", module="redis", library="redis", extra="redis")
            raise
        return open_redis_store(url, timeout=timeout)
    raise ConfigError(
        f"unknown store scheme {scheme!r} in {mask_url(url)!r}: use memory://, memcached://, redis://, "
        "rediss://, unix://, redis+cluster:// or redis+sentinel://"
    )
