"""``memory://``: a thread-safe, bounded, expiring store inside one process, fair between tenants.

Good for tests and single-process services.  It gives the same guarantees as
the network stores *within one process*; several worker processes each get
their own store, so they do not protect each other (use Redis or memcached).

``memory://`` is private to the middleware that opens it; ``memory://<name>``
is shared by every middleware in the process that names it.  URL options:

``max_items``
    Records held at most (default :data:`DEFAULT_MAX_ITEMS`).
``max_bytes``
    Bytes held at most (default :data:`DEFAULT_MAX_BYTES`, 64 MiB); each record
    counts its key, its value and :data:`RECORD_OVERHEAD`.

When either bound is reached, expired records go first, then *completed*
records, taken from the tenant that holds the most: the tenant whose completed
records are the largest share of ``max_bytes`` or of ``max_items`` (whichever
share is larger) gives up its oldest one, and so on until the new record fits.
One tenant's many or large answers therefore evict its own oldest answers, never
the completed record of a tenant that holds less.  A record's tenant is the
scope the idempotency middleware writes in the record's head (its ``"sc"``:
the project under the default ``scope = project``); records without one share
one tenant.

An in-flight claim is never evicted -- that would let a retry run alongside
the request that holds it: a claim that finds the store full of claims is
refused (:class:`~apimw.errors.StoreError`: 503 upstream), and a record larger
than the whole budget is refused with :class:`~apimw._stores.RecordTooLarge`
(the middleware stores a tombstone instead).
"""

from __future__ import annotations

import heapq
import itertools
import re
import threading
import time
from collections import OrderedDict
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from apimw._stores.base import PENDING_STATE, PREFIX_LEN, RecordTooLarge, mask_url
from apimw.errors import ConfigError, StoreError

DEFAULT_MAX_ITEMS: Final = 100_000
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
#: Bytes accounted per record on top of its key and value (dict slot, tuple, object headers).
RECORD_OVERHEAD: Final = 200

_NAMED: dict[str, MemoryStore] = {}
_NAMED_LOCK = threading.Lock()


def _in_flight(value: bytes) -> bool:
    return value[PREFIX_LEN - 1 : PREFIX_LEN] == PENDING_STATE


#: The ``"sc"`` member of a record's JSON head: outside a JSON string a quote is never escaped,
#: so a header value cannot forge it.
_SCOPE_MEMBER: Final = re.compile(rb'"sc":("(?:[^"\\]|\\.)*")')


def record_tenant(value: bytes) -> bytes:
    """The tenant of a record: the ``"sc"`` (scope) of the JSON head after its prefix, as the JSON
    string it is written as (equal scopes are written alike), else ``b""``."""
    end = value.find(b"\n", PREFIX_LEN)
    found = _SCOPE_MEMBER.search(value, PREFIX_LEN, end) if end > 0 else None
    return b"" if found is None else found.group(1)


class _Tenant:
    """One tenant's completed records, oldest first, and what they weigh."""

    __slots__ = ("bytes", "keys", "stamp")

    def __init__(self) -> None:
        self.keys: OrderedDict[str, None] = OrderedDict()
        self.bytes = 0
        self.stamp = 0  # which of the tenant's entries in the eviction heap is current


class MemoryStore:
    """Records in memory, guarded by one lock; expiry by ``time.monotonic()``.

    *max_items* / *max_bytes*: the bounds (see the module doc, which also gives the
    eviction rule); *name*: for logs.  ``_claims`` holds in-flight records (never
    evicted), ``_done`` the completed ones; ``_tenants`` each tenant's completed keys,
    oldest first, and ``_heaviest`` a heap of the tenants by their share of the store.
    """

    def __init__(
        self,
        *,
        max_items: int = DEFAULT_MAX_ITEMS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        name: str = "memory://",
    ) -> None:
        if max_items < 1:
            raise ConfigError(f"memory store max_items must be >= 1, got {max_items}")
        if max_bytes < 1:
            raise ConfigError(f"memory store max_bytes must be >= 1, got {max_bytes}")
        self.name = name
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._claims: dict[str, tuple[bytes, float]] = {}
        self._done: dict[str, tuple[bytes, float]] = {}
        self._tenant_of: dict[str, bytes] = {}
        self._tenants: dict[bytes, _Tenant] = {}
        self._heaviest: list[tuple[float, int, bytes]] = []  # (-share, stamp, tenant); stale entries skipped
        self._stamps = itertools.count(1)
        self._bytes = 0
        self._lock = threading.Lock()
        self._next_sweep = 0.0

    def __repr__(self) -> str:
        return f"<MemoryStore {self.name} max_items={self.max_items} max_bytes={self.max_bytes}>"

    @property
    def bytes_used(self) -> int:
        """Accounted bytes of the records held (keys, values and :data:`RECORD_OVERHEAD` each)."""
        return self._bytes

    @staticmethod
    def _size(key: str, value: bytes) -> int:
        return len(key) + len(value) + RECORD_OVERHEAD

    def _items(self) -> list[tuple[str, tuple[bytes, float]]]:
        """Every record held, expired or not (for tests and debugging)."""
        with self._lock:
            return [*self._claims.items(), *self._done.items()]

    def _weigh(self, name: bytes, tenant: _Tenant) -> None:
        """Record *tenant*'s share of the store in the eviction heap (its older entries go stale)."""
        if not tenant.keys:
            del self._tenants[name]
            return
        tenant.stamp = next(self._stamps)
        share = max(tenant.bytes / self.max_bytes, len(tenant.keys) / self.max_items)
        heapq.heappush(self._heaviest, (-share, tenant.stamp, name))
        if len(self._heaviest) > 4 * len(self._tenants) + 64:  # bounded: rebuilt from the live entries
            live = {(name, t.stamp) for name, t in self._tenants.items()}
            self._heaviest = [entry for entry in self._heaviest if (entry[2], entry[1]) in live]
            heapq.heapify(self._heaviest)

    def _heaviest_tenant(self) -> _Tenant | None:
        """The tenant whose completed records weigh the most, or ``None`` if there are none."""
        while self._heaviest:
            _, stamp, name = self._heaviest[0]
            tenant = self._tenants.get(name)
            if tenant is not None and tenant.stamp == stamp:
                return tenant
            heapq.heappop(self._heaviest)
        return None

    def _drop(self, key: str) -> None:
        entry = self._claims.pop(key, None)
        if entry is None:
            entry = self._done.pop(key, None)
            if entry is not None:
                name = self._tenant_of.pop(key)
                tenant = self._tenants[name]
                del tenant.keys[key]
                tenant.bytes -= self._size(key, entry[0])
                self._weigh(name, tenant)
        if entry is not None:
            self._bytes -= self._size(key, entry[0])

    def _live(self, key: str, now: float) -> bytes | None:
        entry = self._claims.get(key) or self._done.get(key)
        if entry is None:
            return None
        if entry[1] <= now:
            self._drop(key)
            return None
        return entry[0]

    def _over(self, extra_items: int, extra_bytes: int) -> bool:
        count = len(self._claims) + len(self._done) + extra_items
        return count > self.max_items or self._bytes + extra_bytes > self.max_bytes

    def _make_room(self, key: str, value: bytes, now: float) -> None:
        """Evict until *value* fits under *key*; raise if only in-flight claims stand in the way.

        *key* is absent or an in-flight claim here (claim and complete write nothing else), so
        it is never among the completed records evicted.
        """
        size = self._size(key, value)
        if size > self.max_bytes:
            raise RecordTooLarge(
                f"{self.name}: a record of {len(value)} bytes is larger than the store's max_bytes "
                f"({self.max_bytes})"
            )
        old = self._claims.get(key)
        extra_items = 0 if old is not None else 1
        extra_bytes = size - (self._size(key, old[0]) if old is not None else 0)
        if not self._over(extra_items, extra_bytes):
            return
        if now >= self._next_sweep:  # a full sweep at most once a second (it is O(n))
            self._next_sweep = now + 1.0
            for table in (self._claims, self._done):
                for stale in [k for k, (_, exp) in table.items() if exp <= now and k != key]:
                    self._drop(stale)
        while self._over(extra_items, extra_bytes):
            tenant = self._heaviest_tenant()
            if tenant is None:
                raise StoreError(
                    f"{self.name}: full of in-flight claims ({len(self._claims)} records, "
                    f"{self._bytes} bytes); raise max_items / max_bytes"
                )
            self._drop(next(iter(tenant.keys)))  # that tenant's oldest completed record

    def _put(self, key: str, value: bytes, ttl: float, now: float) -> None:
        self._make_room(key, value, now)
        self._drop(key)
        if _in_flight(value):
            self._claims[key] = (value, now + ttl)
        else:
            self._done[key] = (value, now + ttl)
            name = self._tenant_of[key] = record_tenant(value)
            tenant = self._tenants.get(name)
            if tenant is None:
                tenant = self._tenants[name] = _Tenant()
            tenant.keys[key] = None
            tenant.bytes += self._size(key, value)
            self._weigh(name, tenant)
        self._bytes += self._size(key, value)

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        now = time.monotonic()
        with self._lock:
            current = self._live(key, now)
            if current is not None:
                return current
            self._put(key, value, lease, now)
            return None

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        now = time.monotonic()
        with self._lock:
            current = self._live(key, now)
            if current is None or not current.startswith(expect):
                return False
            self._put(key, value, ttl, now)
            return True

    def release(self, key: str, expect: bytes) -> bool:
        now = time.monotonic()
        with self._lock:
            current = self._live(key, now)
            if current is None or not current.startswith(expect):
                return False
            self._drop(key)
            return True

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        now = time.monotonic()
        with self._lock:
            current = self._live(key, now)
            if current is None or not current.startswith(expect):
                return False
            table = self._claims if key in self._claims else self._done
            table[key] = (current, now + lease)
            return True

    def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._live(key, time.monotonic())

    def close(self) -> None:
        """Nothing to close; the records stay (a store is not a connection)."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._claims) + len(self._done)


def _positive(params: dict[str, str], name: str, default: int, url: str) -> int:
    raw = params.get(name, str(default))
    if not raw.isdigit() or not raw.isascii() or int(raw) < 1:
        raise ConfigError(
            f"memory store: {name} must be a positive integer, got {raw!r} in {mask_url(url)!r}"
        )
    return int(raw)


def open_memory_store(url: str) -> MemoryStore:
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = set(params) - {"max_items", "max_bytes"}
    if unknown:
        raise ConfigError(f"memory store: unknown URL parameter(s) {sorted(unknown)} in {mask_url(url)!r}")
    max_items = _positive(params, "max_items", DEFAULT_MAX_ITEMS, url)
    max_bytes = _positive(params, "max_bytes", DEFAULT_MAX_BYTES, url)
    name = (parts.netloc + parts.path).strip("/")
    if not name:
        return MemoryStore(max_items=max_items, max_bytes=max_bytes)
    with _NAMED_LOCK:
        store = _NAMED.get(name)
        if store is None:
            store = _NAMED[name] = MemoryStore(
                max_items=max_items, max_bytes=max_bytes, name=f"memory://{name}"
            )
        return store
