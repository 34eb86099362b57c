"""``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://``, ``redis+sentinel://`` via redis-py.

Every record is one key, so every operation is a single-key command or a
single-key Lua script, which Redis Cluster routes without hash tags.

* Claim: ``SET key value NX PX lease GET`` (Redis >= 7.0), which creates the
  record or returns the one there in a single round trip; on older servers a
  Lua script does the same.
* Fenced complete/release/extend: Lua scripts compare the first 33 bytes of the
  record (``GETRANGE``, cheap even for a large record) with the caller's owner
  prefix, then ``SET ... PX retention``, ``DEL`` or ``PEXPIRE`` -- the pattern of redis-py's
  own ``Lock``.
* Errors: one quick retry of a command whose connection broke (a pooled
  connection that died with a server restart); then :class:`StoreError`.
  Replaying the claim script is safe: the caller recognises its own owner id.
* Speed: with a ``redis.Redis`` client (``redis://``, ``rediss://``, ``unix://``,
  Sentinel) each command goes straight over a redis-py connection of the
  store's own (redis-py still connects, authenticates, speaks TLS and parses
  RESP), skipping the client's per-command machinery -- pool checkout,
  retry wrapper, event dispatch, metrics -- which costs more than the network
  round trip itself on loopback.  Scripts run by ``EVALSHA`` (``EVAL`` when the
  server has forgotten them).  Redis Cluster uses the ``RedisCluster`` client.

URLs:

``redis://[[user]:password@]host:port/db?socket_timeout=0.5``, ``rediss://...``, ``unix:///path?db=0``
    Anything ``redis.Redis.from_url`` accepts.
``redis+cluster://[[user]:password@]host:port[,host:port...]``
    ``RedisCluster`` with these startup nodes.
``redis+sentinel://[[user]:password@]host:port[,host:port...]/<service_name>[/<db>]``
    ``Sentinel(...).master_for(service_name)``; the password is the master's.

Redis replication is asynchronous: a failover can lose a claim or a record
written just before it.  Run with ``maxmemory-policy noeviction`` so records
are not evicted.
"""

from __future__ import annotations

import importlib
import math
import os
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from apimw._stores import PREFIX_LEN, display_url, mask_url
from apimw.errors import ConfigError, StoreError

_CLAIM: Final = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
local v = redis.call('GET', KEYS[1])
if v then return v end
return ''
"""
_COMPLETE: Final = f"""
if redis.call('GETRANGE', KEYS[1], 0, {PREFIX_LEN - 1}) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
_RELEASE: Final = f"""
if redis.call('GETRANGE', KEYS[1], 0, {PREFIX_LEN - 1}) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
_EXTEND: Final = f"""
if redis.call('GETRANGE', KEYS[1], 0, {PREFIX_LEN - 1}) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_ERRORS: Final = (redis.RedisError, OSError)
#: A broken connection: retried once on a fresh connection.
_BROKEN: Final = (redis.ConnectionError, redis.TimeoutError, OSError)


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def claim_reply(result: Any, name: str) -> bytes | None:
    """What the claim script's reply means: ``None`` (this call created the record) or the record there."""
    if isinstance(result, int):
        return None
    if isinstance(result, str):  # a client built with decode_responses=True
        raise StoreError(f"{name}: the client must not decode responses")
    return bytes(result)


class RedisStore:
    """Records in Redis (standalone, Sentinel-managed or Cluster)."""

    def __init__(self, client: Any, *, name: str) -> None:
        self.name = name
        self.client = client
        self._claim = client.register_script(_CLAIM)
        self._set_get = True
        self._complete = client.register_script(_COMPLETE)
        self._release = client.register_script(_RELEASE)
        self._extend = client.register_script(_EXTEND)
        pool = getattr(client, "connection_pool", None)
        # plain Redis and Sentinel clients: commands on connections of our own (see the module doc)
        self._direct = (
            isinstance(client, redis.Redis) and pool is not None and getattr(pool, "cache", None) is None
        )
        self._pool: Any = pool
        self._idle: list[Any] = []
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"<RedisStore {self.name}>"

    def ping(self) -> None:
        """``PING`` on a fresh connection, closed afterwards; raise :class:`StoreError` if it fails."""
        try:
            if not self._direct:
                self.client.ping()
                return
            pool = self._pool
            conn = pool.connection_class(**pool.connection_kwargs)
            try:
                conn.connect()
                conn.send_command("PING", check_health=False)
                conn.read_response()
            finally:
                conn.disconnect()
        except _ERRORS as exc:
            raise self._fail("ping", exc) from exc

    def _connection(self) -> Any:
        if self._pid != os.getpid():  # forked: never share sockets with the parent
            self._idle = []
            self._pid = os.getpid()
        try:
            return self._idle.pop()
        except IndexError:
            pool = self._pool
            return pool.connection_class(**pool.connection_kwargs)

    def _run(self, *args: Any) -> Any:
        """One command on one of our connections; a broken connection is retried once."""
        conn = self._connection()
        packed = conn.pack_command(*args)
        for attempt in (0, 1):
            try:
                conn.connect()  # a no-op when connected; Sentinel connections find the master here
                conn.send_packed_command(packed, check_health=False)
                reply = conn.read_response(disable_decoding=True)
            except redis.ResponseError:
                self._idle.append(conn)  # the server refused the command; the connection is fine
                raise
            except _BROKEN:
                conn.disconnect()  # the next attempt reconnects it
                if attempt:
                    raise
                continue
            except BaseException:
                conn.disconnect()
                raise
            self._idle.append(conn)
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    def _eval(self, script: Any, key: str, *args: Any) -> Any:
        if not self._direct:
            return script(keys=[key], args=list(args))
        try:
            return self._run("EVALSHA", script.sha, 1, key, *args)
        except redis.exceptions.NoScriptError:  # a restarted server: EVAL sends (and caches) the script
            return self._run("EVAL", script.script, 1, key, *args)

    def _fail(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"{self.name}: {what} failed: {type(exc).__name__}: {exc}")

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        if self._set_get:
            # Redis >= 7.0: SET NX GET is the claim and the read of a taken key in one plain command.
            try:
                if self._direct:
                    old = self._run("SET", key, value, "NX", "PX", _ms(lease), "GET")
                else:
                    old = self.client.set(key, value, nx=True, px=_ms(lease), get=True)
            except (redis.ResponseError, redis.DataError):
                self._set_get = False  # an older server (or client): use the Lua script from now on
            except _ERRORS as exc:
                raise self._fail("claim", exc) from exc
            else:
                return None if old is None else bytes(old)
        try:
            result = self._eval(self._claim, key, value, _ms(lease))
        except _ERRORS as exc:
            raise self._fail("claim", exc) from exc
        return claim_reply(result, self.name)

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        try:
            return bool(self._eval(self._complete, key, expect[:PREFIX_LEN], value, _ms(ttl)))
        except _ERRORS as exc:
            raise self._fail("complete", exc) from exc

    def release(self, key: str, expect: bytes) -> bool:
        try:
            return bool(self._eval(self._release, key, expect[:PREFIX_LEN]))
        except _ERRORS as exc:
            raise self._fail("release", exc) from exc

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        try:
            return bool(self._eval(self._extend, key, expect[:PREFIX_LEN], _ms(lease)))
        except _ERRORS as exc:
            raise self._fail("extend", exc) from exc

    def get(self, key: str) -> bytes | None:
        try:
            value = self._run("GET", key) if self._direct else self.client.get(key)
        except _ERRORS as exc:
            raise self._fail("get", exc) from exc
        return None if value is None else bytes(value)

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.disconnect()
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


def _timeouts(params: dict[str, str], timeout: float, url: str) -> dict[str, float]:
    unknown = set(params) - {"socket_timeout", "socket_connect_timeout"}
    if unknown:
        raise ConfigError(f"redis store: unknown URL parameter(s) {sorted(unknown)} in {mask_url(url)!r}")
    try:
        return {
            "socket_timeout": float(params.get("socket_timeout", timeout)),
            "socket_connect_timeout": float(params.get("socket_connect_timeout", timeout)),
        }
    except ValueError:
        raise ConfigError(f"redis store: bad timeout in {mask_url(url)!r}") from None


def open_redis_store(url: str, *, timeout: float = 0.5) -> RedisStore:
    return RedisStore(redis_client(url, timeout=timeout, flavour=SYNC), name=display_url(url))


class Flavour(NamedTuple):
    """redis-py's client classes of one I/O model: blocking (``redis``) or asyncio (``redis.asyncio``)."""

    redis: Any
    cluster: str
    sentinel: str
    retry: Any


SYNC: Final = Flavour(redis.Redis, "redis.cluster", "redis.sentinel", Retry)


def redis_client(url: str, *, timeout: float, flavour: Flavour) -> Any:
    """The redis-py client of *url* (standalone, Cluster or Sentinel) in *flavour*'s I/O model."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    retry = flavour.retry(ExponentialBackoff(cap=0.05, base=0.005), 1)
    if scheme == "redis+cluster":
        cluster = importlib.import_module(flavour.cluster)
        nodes, username, password = _nodes(parts.netloc, url)
        return cluster.RedisCluster(
            startup_nodes=[cluster.ClusterNode(h, p) for h, p in nodes],
            username=username,
            password=password,
            retry=retry,
            **_timeouts(params, timeout, url),
        )
    if scheme == "redis+sentinel":
        sentinel_module = importlib.import_module(flavour.sentinel)
        nodes, username, password = _nodes(parts.netloc, url)
        segments = [s for s in parts.path.split("/") if s]
        if not segments or len(segments) > 2 or (len(segments) == 2 and not segments[1].isdigit()):
            raise ConfigError(
                f"redis store: {mask_url(url)!r} must name the Sentinel service: redis+sentinel://host:port/<service>[/<db>]"
            )
        times = _timeouts(params, timeout, url)
        sentinel = sentinel_module.Sentinel(nodes, sentinel_kwargs=dict(times), **times)
        return sentinel.master_for(
            segments[0],
            db=int(segments[1]) if len(segments) == 2 else 0,
            username=username,
            password=password,
            retry=retry,
            **times,
        )
    kwargs: dict[str, Any] = {"retry": retry, "socket_timeout": timeout, "socket_connect_timeout": timeout}
    try:
        return flavour.redis.from_url(url, **kwargs)  # URL parameters win over these defaults
    except ValueError as exc:
        # redis-py's message may quote a piece of the URL (a password misread as a port): only
        # repeat it when the URL carries no credentials
        masked = mask_url(url)
        reason = f": {exc}" if masked == url else ""
        raise ConfigError(f"redis store: cannot use {masked!r}{reason}") from None
