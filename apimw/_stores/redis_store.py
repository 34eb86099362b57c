"""``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://``, ``redis+sentinel://`` via redis-py.

Every record is one key, so every operation is a single-key command or a
single-key Lua script, which Redis Cluster routes without hash tags.  Everything
goes through redis-py's public client API (``redis.Redis`` over a connection pool,
``RedisCluster``, ``Sentinel.master_for``), one round trip per call:

* Claim: ``SET key value NX PX lease GET`` (Redis >= 7.0), which creates the
  record or returns the one there; on older servers a Lua script does the same.
* Fenced complete/release/extend: Lua scripts (``register_script``: ``EVALSHA``,
  ``EVAL`` when the server has forgotten them) compare the first 33 bytes of the
  record (``GETRANGE``, cheap even for a large record) with the caller's owner
  prefix, then ``SET ... PX retention``, ``DEL`` or ``PEXPIRE`` -- the pattern of
  redis-py's own ``Lock``.
* Errors: redis-py retries a command whose connection broke once (a pooled
  connection that died with a server restart); then :class:`StoreError`.
  Replaying the claim is safe: the caller recognises its own owner id.

URLs and their options:

``redis://[[user]:password@]host:port/db?max_connections=50&timeout=0.5``, ``rediss://``, ``unix:///path?db=0``
    Anything ``redis.BlockingConnectionPool.from_url`` accepts.  ``max_connections``
    bounds the connections the store opens (default :data:`DEFAULT_MAX_CONNECTIONS`,
    redis-py's own default for a blocking pool); a call that finds them all busy waits
    up to ``timeout`` seconds for one (default: the store timeout), then fails
    (503 upstream).  ``socket_timeout`` / ``socket_connect_timeout`` default to the
    store timeout.
``redis+cluster://[[user]:password@]host:port[,host:port...]?max_connections=50``
    ``RedisCluster`` with these startup nodes; ``max_connections`` bounds each node's
    blocking pool.
``redis+sentinel://[[user]:password@]host:port[,host:port...]/<service_name>[/<db>]?max_connections=50``
    ``Sentinel(...).master_for(service_name)``; the password is the master's;
    ``max_connections`` bounds the master's pool, which refuses past it: the store waits
    up to the store timeout for a free connection, then fails (503 upstream).

The cluster and sentinel URLs take ``socket_timeout``, ``socket_connect_timeout``
and ``max_connections`` only.  Redis replication is asynchronous: a failover can
lose a claim or a record written just before it.  Run with
``maxmemory-policy noeviction`` so records are not evicted.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

import redis
import redis.cluster
import redis.sentinel
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from apimw._stores.base import PREFIX_LEN, display_url, mask_url
from apimw.errors import ConfigError, StoreError

#: Lua: create the record (reply 1) or return the one there (the claim before Redis 7.0).
CLAIM_SCRIPT: Final = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
local v = redis.call('GET', KEYS[1])
if v then return v end
return ''
"""
#: Lua: replace the record if it still starts with the owner prefix ARGV[1].
COMPLETE_SCRIPT: Final = f"""
if redis.call('GETRANGE', KEYS[1], 0, {PREFIX_LEN - 1}) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
#: Lua: delete the record if it still starts with the owner prefix ARGV[1].
RELEASE_SCRIPT: Final = f"""
if redis.call('GETRANGE', KEYS[1], 0, {PREFIX_LEN - 1}) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
#: Lua: extend the record's lease if it still starts with the owner prefix ARGV[1].
EXTEND_SCRIPT: Final = f"""
if redis.call('GETRANGE', KEYS[1], 0, {PREFIX_LEN - 1}) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
#: What redis-py raises when the server cannot be reached or refuses: a StoreError for the caller.
ERRORS: Final = (redis.RedisError, OSError)
#: Connections a store opens (per node for Cluster) unless the URL's ``max_connections`` says otherwise.
DEFAULT_MAX_CONNECTIONS: Final = 50


def milliseconds(seconds: float) -> int:
    """*seconds* as whole milliseconds, at least 1 (``PX`` / ``PEXPIRE``)."""
    return max(1, math.ceil(seconds * 1000))


def claim_reply(result: Any, name: str) -> bytes | None:
    """What the claim script's reply means: ``None`` (this call created the record) or the record there."""
    if isinstance(result, int):
        return None
    if isinstance(result, str):  # a client built with decode_responses=True
        raise StoreError(f"{name}: the client must not decode responses")
    return bytes(result)


class RedisStore:
    """Records in Redis (standalone, Sentinel-managed or Cluster) through a redis-py client.

    *client* is a ``redis.Redis`` (over a bounded pool), ``RedisCluster`` or a Sentinel
    master client, built with ``decode_responses=False``; :func:`open_redis_store` builds
    it from a URL.  The store owns it: :meth:`close` closes it.  *slots*: for a client whose
    pool refuses a call past its ``max_connections`` instead of waiting (redis-py's Sentinel
    pool), each call first waits up to *wait* seconds for one of *slots* slots.
    """

    def __init__(self, client: Any, *, name: str, slots: int | None = None, wait: float = 0.5) -> None:
        self.name = name
        self.client = client
        self._claim = client.register_script(CLAIM_SCRIPT)
        self._set_get = True
        self._complete = client.register_script(COMPLETE_SCRIPT)
        self._release = client.register_script(RELEASE_SCRIPT)
        self._extend = client.register_script(EXTEND_SCRIPT)
        self._slots = threading.BoundedSemaphore(slots) if slots is not None else None
        self._slot_count = slots
        self._wait = wait

    def __repr__(self) -> str:
        return f"<RedisStore {self.name}>"

    def _fail(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"{self.name}: {what} failed: {type(exc).__name__}: {exc}")

    def _run(self, what: str, call: Callable[[], Any]) -> Any:
        """``call()``, in a slot if the client needs one; every failure a :class:`StoreError`."""
        slots = self._slots
        if slots is not None and not slots.acquire(timeout=self._wait):
            raise StoreError(
                f"{self.name}: {what}: all {self._slot_count} connections stayed busy for "
                f"{self._wait:g} s (max_connections)"
            )
        try:
            return call()
        except ERRORS as exc:
            raise self._fail(what, exc) from exc
        finally:
            if slots is not None:
                slots.release()

    def ping(self) -> None:
        """``PING``; raise :class:`StoreError` if it fails."""
        self._run("ping", self.client.ping)

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        if self._set_get:
            # Redis >= 7.0: SET NX GET is the claim and the read of a taken key in one plain command.
            try:
                old = self._run(
                    "claim", lambda: self.client.set(key, value, nx=True, px=milliseconds(lease), get=True)
                )
            except StoreError as exc:
                if not isinstance(exc.__cause__, (redis.ResponseError, redis.DataError)):
                    raise
                self._set_get = False  # an older server (or client): use the Lua script from now on
            else:
                return None if old is None else bytes(old)
        result = self._run("claim", lambda: self._claim(keys=[key], args=[value, milliseconds(lease)]))
        return claim_reply(result, self.name)

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        args = [expect[:PREFIX_LEN], value, milliseconds(ttl)]
        return bool(self._run("complete", lambda: self._complete(keys=[key], args=args)))

    def release(self, key: str, expect: bytes) -> bool:
        return bool(self._run("release", lambda: self._release(keys=[key], args=[expect[:PREFIX_LEN]])))

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        args = [expect[:PREFIX_LEN], milliseconds(lease)]
        return bool(self._run("extend", lambda: self._extend(keys=[key], args=args)))

    def get(self, key: str) -> bytes | None:
        value = self._run("get", lambda: self.client.get(key))
        return None if value is None else bytes(value)

    def close(self) -> None:
        """Close the pool's connections (the store reconnects if used again)."""
        self.client.close()


def _nodes(netloc: str, url: str) -> tuple[list[tuple[str, int]], str | None, str | None]:
    auth, _, hosts = netloc.rpartition("@")
    username = password = None
    if auth:
        user, sep, pw = auth.partition(":")
        username = unquote(user) or None
        password = unquote(pw) if sep else None
    nodes = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit():
            raise ConfigError(f"redis store: bad node {item!r} in {mask_url(url)!r} (expected host:port)")
        nodes.append((host, int(port)))
    return nodes, username, password


def _options(params: dict[str, str], timeout: float, url: str) -> dict[str, Any]:
    """The cluster and sentinel URLs' options: socket timeouts and ``max_connections`` (``timeout``,
    the wait for a free connection, is read by the blocking Cluster client only)."""
    unknown = set(params) - {"socket_timeout", "socket_connect_timeout", "max_connections", "timeout"}
    if unknown:
        raise ConfigError(f"redis store: unknown URL parameter(s) {sorted(unknown)} in {mask_url(url)!r}")
    try:
        options: dict[str, Any] = {
            "socket_timeout": float(params.get("socket_timeout", timeout)),
            "socket_connect_timeout": float(params.get("socket_connect_timeout", timeout)),
        }
    except ValueError:
        raise ConfigError(f"redis store: bad timeout in {mask_url(url)!r}") from None
    options["max_connections"] = url_max_connections(params, url)
    return options


def url_max_connections(params: dict[str, str], url: str) -> int:
    """The URL's ``max_connections`` (default :data:`DEFAULT_MAX_CONNECTIONS`), a positive integer."""
    raw = params.get("max_connections", str(DEFAULT_MAX_CONNECTIONS))
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        raise ConfigError(
            f"redis store: max_connections must be a positive integer, got {raw!r} in {mask_url(url)!r}"
        )
    return int(raw)


def open_redis_store(url: str, *, timeout: float = 0.5) -> RedisStore:
    """The store of a Redis *url* (see the module doc for the URLs and their options).

    *timeout* (seconds) is the default of the URL's ``socket_timeout``,
    ``socket_connect_timeout`` and ``timeout`` (the wait for a free pooled connection).
    """
    client = redis_client(url, timeout=timeout, flavour=SYNC)
    return RedisStore(client, name=display_url(url), slots=refusing_pool_slots(url, SYNC), wait=timeout)


def refusing_pool_slots(url: str, flavour: Flavour) -> int | None:
    """The URL's ``max_connections`` when *flavour*'s client for it refuses a call past that bound
    instead of waiting (Sentinel; Cluster on asyncio), so the store must wait itself; else ``None``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "redis+sentinel" or (scheme == "redis+cluster" and flavour is not SYNC):
        return url_max_connections(dict(parse_qsl(parts.query)), url)
    return None


class Flavour(NamedTuple):
    """redis-py's client classes of one I/O model: blocking (``redis``) or asyncio (``redis.asyncio``)."""

    redis: Any
    pool: Any
    cluster: Any
    cluster_node: Any
    sentinel: Any
    retry: Any


SYNC: Final = Flavour(
    redis.Redis,
    redis.BlockingConnectionPool,
    redis.cluster.RedisCluster,
    redis.cluster.ClusterNode,
    redis.sentinel.Sentinel,
    Retry,
)


def redis_client(url: str, *, timeout: float, flavour: Flavour) -> Any:
    """The redis-py client of *url* (standalone, Cluster or Sentinel) in *flavour*'s I/O model,
    its connections bounded by the URL's ``max_connections``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    retry = flavour.retry(ExponentialBackoff(cap=0.05, base=0.005), 1)
    if scheme == "redis+cluster":
        nodes, username, password = _nodes(parts.netloc, url)
        options = _options(params, timeout, url)
        if flavour is SYNC:
            # each node's pool waits for a free connection, as the standalone store's does;
            # redis-py builds nodes on connection_pool_class when given the first node's URL
            host, port = nodes[0]
            options["url"] = f"redis://[{host}]:{port}" if ":" in host else f"redis://{host}:{port}"
            options["connection_pool_class"] = redis.BlockingConnectionPool
            options["timeout"] = float(params.get("timeout", timeout))
            nodes = nodes[1:]
        return flavour.cluster(
            startup_nodes=[flavour.cluster_node(h, p) for h, p in nodes],
            username=username,
            password=password,
            retry=retry,
            **options,
        )
    if scheme == "redis+sentinel":
        nodes, username, password = _nodes(parts.netloc, url)
        segments = [s for s in parts.path.split("/") if s]
        if not segments or len(segments) > 2 or (len(segments) == 2 and not segments[1].isdigit()):
            raise ConfigError(
                f"redis store: {mask_url(url)!r} must name the Sentinel service: redis+sentinel://host:port/<service>[/<db>]"
            )
        options = _options(params, timeout, url)
        times = {k: options[k] for k in ("socket_timeout", "socket_connect_timeout")}
        sentinel = flavour.sentinel(nodes, sentinel_kwargs=dict(times), **times)
        return sentinel.master_for(
            segments[0],
            db=int(segments[1]) if len(segments) == 2 else 0,
            username=username,
            password=password,
            retry=retry,
            **options,
        )
    url_max_connections(params, url)
    defaults: dict[str, Any] = {
        "retry": retry,
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "max_connections": DEFAULT_MAX_CONNECTIONS,
        "timeout": timeout,  # the wait for a free connection when all max_connections are busy
    }
    try:
        pool = flavour.pool.from_url(url, **defaults)  # URL parameters win over these defaults
    except ValueError as exc:
        # redis-py's message may quote a piece of the URL (a password misread as a port): only
        # repeat it when the URL carries no credentials
        masked = mask_url(url)
        reason = f": {exc}" if masked == url else ""
        raise ConfigError(f"redis store: cannot use {masked!r}{reason}") from None
    return flavour.redis.from_pool(pool)  # the client owns the pool: closing it closes the pool
