"""``memory://``: a thread-safe, bounded, expiring store inside one process.

Good for tests and single-process services.  It gives the same guarantees as
the network stores *within one process*; several worker processes each get
their own store, so they do not protect each other (use Redis or memcached).

``memory://`` is private to the middleware that opens it; ``memory://<name>``
is shared by every middleware in the process that names it.  ``?max_items=N``
(default 100000) bounds memory: when full, expired records go first, then the
oldest records, as memcached's LRU would evict them.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from apimw.errors import ConfigError

DEFAULT_MAX_ITEMS: Final = 100_000

_NAMED: dict[str, MemoryStore] = {}
_NAMED_LOCK = threading.Lock()


class MemoryStore:
    """Records in a dict guarded by one lock; expiry by ``time.monotonic()``."""

    def __init__(self, *, max_items: int = DEFAULT_MAX_ITEMS, name: str = "memory://") -> None:
        if max_items < 1:
            raise ConfigError(f"memory store max_items must be >= 1, got {max_items}")
        self.name = name
        self.max_items = max_items
        self._data: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._next_sweep = 0.0

    def _live(self, key: str, now: float) -> bytes | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        if entry[1] <= now:
            del self._data[key]
            return None
        return entry[0]

    def _put(self, key: str, value: bytes, ttl: float, now: float) -> None:
        self._data[key] = (value, now + ttl)
        self._data.move_to_end(key)
        if len(self._data) > self.max_items:
            if now >= self._next_sweep:  # a full sweep at most once a second (it is O(n))
                self._next_sweep = now + 1.0
                for stale in [k for k, (_, exp) in self._data.items() if exp <= now]:
                    del self._data[stale]
            while len(self._data) > self.max_items:
                self._data.popitem(last=False)

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
            del self._data[key]
            return True

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        now = time.monotonic()
        with self._lock:
            current = self._live(key, now)
            if current is None or not current.startswith(expect):
                return False
            self._data[key] = (current, now + lease)
            return True

    def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._live(key, time.monotonic())

    def close(self) -> None:
        """Nothing to close; the records stay (a store is not a connection)."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


def open_memory_store(url: str) -> MemoryStore:
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = set(params) - {"max_items"}
    if unknown:
        raise ConfigError(f"memory store: unknown URL parameter(s) {sorted(unknown)} in {url!r}")
    raw = params.get("max_items", str(DEFAULT_MAX_ITEMS))
    if not raw.isdigit():
        raise ConfigError(f"memory store: max_items must be a positive integer, got {raw!r}")
    max_items = int(raw)
    name = (parts.netloc + parts.path).strip("/")
    if not name:
        return MemoryStore(max_items=max_items)
    with _NAMED_LOCK:
        store = _NAMED.get(name)
        if store is None:
            store = _NAMED[name] = MemoryStore(max_items=max_items, name=f"memory://{name}")
        return store
