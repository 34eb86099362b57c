"""apimw's outcomes as Prometheus metrics (``pip install 'apimw[prometheus]'``).

:class:`PrometheusMetrics` is an :class:`apimw.metrics.Metrics` that counts into
prometheus_client instruments, registered in the registry it is given (the default
registry by default)::

    from apimw.metrics_prometheus import PrometheusMetrics
    metrics = PrometheusMetrics()            # or PrometheusMetrics(registry=my_registry)
    app = MicroversionMiddleware(app, ..., metrics=metrics)

In a paste.deploy ini, ``metrics = apimw.metrics_prometheus:METRICS`` names one instance
on the default registry, made on first use (so importing this module registers nothing).
Expose them as any prometheus_client metrics (``make_wsgi_app()``, ``start_http_server``).

==========================================  ==========  ===========================
name                                        type        labels
==========================================  ==========  ===========================
``apimw_microversion_requests_total``       counter     ``outcome``, ``version``
``apimw_etag_outcomes_total``               counter     ``outcome``
``apimw_idempotency_outcomes_total``        counter     ``outcome``
``apimw_idempotency_store_seconds``         histogram   ``operation``
``apimw_idempotency_store_errors_total``    counter     ``operation``
==========================================  ==========  ===========================
"""

from __future__ import annotations

import threading
from typing import Any, Final

from apimw.errors import explain_missing
from apimw.metrics import default_instance

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
except ImportError as exc:
    explain_missing(exc, "apimw.metrics_prometheus", module="prometheus_client", library="prometheus_client",
                    extra="prometheus")  # fmt: skip
    raise

__all__ = ["STORE_BUCKETS", "PrometheusMetrics"]

#: Store call buckets (seconds): a Redis or memcached round trip on a LAN is 0.1-1 ms,
#: the default store_timeout is 0.5 s.
STORE_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class PrometheusMetrics:
    """Counters and a histogram for every apimw outcome (see the module docstring).

    Label children are looked up once per label values and kept (the label sets are
    small and fixed), so a report is one dict lookup and one increment.
    """

    def __init__(self, *, registry: CollectorRegistry | None = REGISTRY, namespace: str = "apimw") -> None:
        self.microversion_requests = Counter(
            "microversion_requests", "Requests negotiated by the microversion middleware, per outcome "
            "(served, deprecated, malformed, unsupported) and served version.",
            ["outcome", "version"], namespace=namespace, registry=registry,
        )  # fmt: skip
        self.etag_outcomes = Counter(
            "etag_outcomes", "Answers the etag middleware gave (not-modified, precondition-failed, "
            "if-match-required, ...).", ["outcome"], namespace=namespace, registry=registry,
        )  # fmt: skip
        self.idempotency_outcomes = Counter(
            "idempotency_outcomes", "Requests with a client token, per outcome (claimed, replayed, "
            "in-flight, fingerprint-mismatch, store-unavailable, ...).",
            ["outcome"], namespace=namespace, registry=registry,
        )  # fmt: skip
        self.store_seconds = Histogram(
            "idempotency_store_seconds", "Duration of the replay store's calls, per operation.",
            ["operation"], namespace=namespace, registry=registry, buckets=STORE_BUCKETS,
        )  # fmt: skip
        self.store_errors = Counter(
            "idempotency_store_errors", "Replay store calls that failed, per operation.",
            ["operation"], namespace=namespace, registry=registry,
        )  # fmt: skip
        self._children: dict[tuple[str, ...], Any] = {}
        self._lock = threading.Lock()

    def _child(self, key: tuple[str, ...], metric: Any, *labels: str) -> Any:
        child = self._children.get(key)
        if child is None:
            with self._lock:
                child = self._children.setdefault(key, metric.labels(*labels))
        return child

    def microversion(self, outcome: str, version: str) -> None:
        self._child(("mv", outcome, version), self.microversion_requests, outcome, version).inc()

    def etag(self, outcome: str) -> None:
        self._child(("etag", outcome), self.etag_outcomes, outcome).inc()

    def idempotency(self, outcome: str) -> None:
        self._child(("idem", outcome), self.idempotency_outcomes, outcome).inc()

    def store(self, operation: str, seconds: float, error: bool) -> None:
        self._child(("store", operation), self.store_seconds, operation).observe(seconds)
        if error:
            self._child(("store-error", operation), self.store_errors, operation).inc()


# ``METRICS``: one instance on the default registry, made on first use
__getattr__ = default_instance(__name__, PrometheusMetrics)
