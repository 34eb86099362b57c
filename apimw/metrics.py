"""What the middlewares did: one small interface they report their outcomes through.

Pass an object with the four methods of :class:`Metrics` as ``metrics=`` to any of the
three middlewares (WSGI or ASGI: the ASGI twins run the same code); the default ``None``
reports nothing and costs nothing.  Each middleware calls one method per outcome it
decides, with a label from a small fixed set (below), never with request data, so a
metrics backend's label sets stay bounded:

``microversion(outcome, version)``
    every request the microversion middleware sees.  *outcome* is ``served``,
    ``deprecated`` (served at a version below ``deprecated_below``), ``malformed`` (400,
    or 406 in the ironic profile) or ``unsupported`` (406); *version* is the served
    version (``"1.50"``), ``""`` when none was served.
``etag(outcome)``
    every answer the etag middleware gives or renders itself: ``not-modified`` (304), and
    the stable code of each problem without its ``etag.`` prefix: ``precondition-failed``
    (412: the pre-check, or a :class:`~apimw.etag.StaleEtag` the app raised),
    ``streamed-without-etag`` (a JSON answer longer than ``max_body_bytes``, sent on as it
    came without the ETag its body may have named),
    ``if-match-required`` (428), ``if-match-malformed`` (400), ``not-found`` (404 from
    :mod:`apimw.etag_db`) ...  Requests it passes through untouched are not reported.
``idempotency(outcome)``
    every request that carried a token (or needed one): ``claimed`` (the app runs under
    the claim), ``replayed``, ``unprotected`` (store down, ``fail_open``), and the stable
    code of each problem without its ``idempotency.`` prefix: ``in-flight`` (409),
    ``fingerprint-mismatch`` (409/422), ``store-unavailable`` (503), ``token-invalid`` ...
``store(operation, seconds, error)``
    every call to the replay store: ``claim``, ``complete``, ``release``, ``extend`` or
    ``get``, how long it took, and whether it raised.

Subclass :class:`NoMetrics` to implement only some of them.  Exporters:
:mod:`apimw.metrics_prometheus` (``pip install 'apimw[prometheus]'``) and
:mod:`apimw.metrics_otel` (``pip install 'apimw[otel]'``).  In a paste.deploy ini (or
Flask config) the option names an object to import: ``metrics =
apimw.metrics_prometheus:METRICS``.  See ``docs/metrics.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final, Protocol, runtime_checkable

from apimw._config import import_named
from apimw.errors import ConfigError

__all__ = [
    "MICROVERSION_OUTCOMES",
    "STORE_OPERATIONS",
    "Metrics",
    "NoMetrics",
    "as_metrics",
    "default_instance",
    "problem_outcome",
]

#: The microversion middleware's outcomes.
MICROVERSION_OUTCOMES: Final = ("served", "deprecated", "malformed", "unsupported")
#: The replay store's operations.
STORE_OPERATIONS: Final = ("claim", "complete", "release", "extend", "get")


@runtime_checkable
class Metrics(Protocol):
    """Where the middlewares report what they did (see the module docstring)."""

    def microversion(self, outcome: str, version: str) -> None:
        """A request negotiated: *outcome* (served, deprecated, malformed, unsupported), *version*."""

    def etag(self, outcome: str) -> None:
        """An answer the etag middleware gave: not-modified, or a problem code's tail."""

    def idempotency(self, outcome: str) -> None:
        """A request with a token: claimed, replayed, unprotected, or a problem code's tail."""

    def store(self, operation: str, seconds: float, error: bool) -> None:
        """One replay store call: its operation, duration and whether it failed."""


class NoMetrics:
    """A :class:`Metrics` that records nothing: subclass it and override what you need."""

    def microversion(self, outcome: str, version: str) -> None:
        return None

    def etag(self, outcome: str) -> None:
        return None

    def idempotency(self, outcome: str) -> None:
        return None

    def store(self, operation: str, seconds: float, error: bool) -> None:
        return None


def default_instance(module: str, factory: Callable[[], Metrics]) -> Callable[[str], Metrics]:
    """An exporter module's ``__getattr__`` (PEP 562) answering ``METRICS``: one instance of
    *factory*, made on first use (so importing the module registers no instrument), for
    ``metrics = <module>:METRICS`` in a paste.deploy ini."""
    made: list[Metrics] = []
    lock = threading.Lock()

    def __getattr__(name: str) -> Metrics:
        if name != "METRICS":
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        with lock:
            if not made:
                made.append(factory())
        return made[0]

    return __getattr__


def problem_outcome(code: str) -> str:
    """The outcome label of a problem's stable *code*: its tail (``etag.precondition-failed``
    -> ``precondition-failed``)."""
    return code.rpartition(".")[2]


def as_metrics(value: Metrics | str | None) -> Metrics | None:
    """The ``metrics`` option: an object with :class:`Metrics`'s methods, ``None``, or (paste,
    Flask) the ``package.module:attribute`` that names one; anything else is a :class:`ConfigError`."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        value = import_named(text, option="metrics")
    if not isinstance(value, Metrics):
        methods = ("microversion", "etag", "idempotency", "store")
        missing = [m for m in methods if not callable(getattr(value, m, None))]
        raise ConfigError(f"metrics: {value!r} lacks {', '.join(missing)} (see apimw.metrics.Metrics)")
    return value
