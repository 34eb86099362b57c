"""A replay store whose every call is timed and reported to a :class:`~apimw.metrics.Metrics`.

The idempotency middleware calls its store through one of these when it has ``metrics``
(and through the store itself when it has none, so no reporting costs nothing).  A call
that raises is reported with ``error=True`` and re-raised unchanged.  The store may be an
asyncio one (``apimw.asgi``): a call is then timed until its awaitable is done.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from apimw._stores import Store
    from apimw.metrics import Metrics

_T = TypeVar("_T")


class MeteredStore:
    """*store*'s calls, each reported as ``metrics.store(operation, seconds, error)``."""

    def __init__(self, store: Store, metrics: Metrics) -> None:
        self.inner = store
        self.name = store.name
        self._report = metrics.store

    def __repr__(self) -> str:
        return f"<MeteredStore {self.inner!r}>"

    def _call(self, operation: str, call: Callable[..., _T], *args: object) -> _T:
        started = time.perf_counter()
        try:
            result = call(*args)
        except BaseException:
            self._report(operation, time.perf_counter() - started, True)
            raise
        if inspect.isawaitable(result):
            return self._awaited(operation, started, result)  # type: ignore[return-value]
        self._report(operation, time.perf_counter() - started, False)
        return result

    async def _awaited(self, operation: str, started: float, result: Awaitable[Any]) -> Any:
        try:
            value = await result
        except BaseException:
            self._report(operation, time.perf_counter() - started, True)
            raise
        self._report(operation, time.perf_counter() - started, False)
        return value

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        return self._call("claim", self.inner.claim, key, value, lease)

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        return self._call("complete", self.inner.complete, key, expect, value, ttl)

    def release(self, key: str, expect: bytes) -> bool:
        return self._call("release", self.inner.release, key, expect)

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        return self._call("extend", self.inner.extend, key, expect, lease)

    def get(self, key: str) -> bytes | None:
        return self._call("get", self.inner.get, key)

    def close(self) -> None:
        self.inner.close()
