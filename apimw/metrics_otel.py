"""apimw's outcomes as OpenTelemetry metrics (``pip install 'apimw[otel]'``).

:class:`OpenTelemetryMetrics` is an :class:`apimw.metrics.Metrics` recording into
instruments of an OpenTelemetry ``Meter`` (by default ``get_meter("apimw")`` of the
global meter provider: configure the SDK and its exporter as usual)::

    from apimw.metrics_otel import OpenTelemetryMetrics
    metrics = OpenTelemetryMetrics()         # or OpenTelemetryMetrics(meter=provider.get_meter("apimw"))
    app = MicroversionMiddleware(app, ..., metrics=metrics)

In a paste.deploy ini, ``metrics = apimw.metrics_otel:METRICS`` names one instance on the
global meter provider, made on first use.  The instruments (attributes as labels):

=====================================  ==================  ===========================
name                                   instrument          attributes
=====================================  ==================  ===========================
``apimw.microversion.requests``        counter             ``outcome``, ``version``
``apimw.etag.outcomes``                counter             ``outcome``
``apimw.idempotency.outcomes``         counter             ``outcome``
``apimw.idempotency.store.duration``   histogram (``s``)   ``operation``, ``error``
=====================================  ==================  ===========================
"""

from __future__ import annotations

from apimw.errors import explain_missing
from apimw.metrics import default_instance

try:
    from opentelemetry import metrics as otel_metrics
except ImportError as exc:
    explain_missing(
        exc, "apimw.metrics_otel", module="opentelemetry", library="opentelemetry-api", extra="otel"
    )
    raise

__all__ = ["OpenTelemetryMetrics"]


class OpenTelemetryMetrics:
    """OpenTelemetry instruments for every apimw outcome (see the module docstring)."""

    def __init__(self, *, meter: otel_metrics.Meter | None = None) -> None:
        meter = meter if meter is not None else otel_metrics.get_meter("apimw")
        self.microversion_requests = meter.create_counter(
            "apimw.microversion.requests", unit="{request}",
            description="Requests negotiated by the microversion middleware, per outcome and served version.",
        )  # fmt: skip
        self.etag_outcomes = meter.create_counter(
            "apimw.etag.outcomes", unit="{response}", description="Answers the etag middleware gave."
        )
        self.idempotency_outcomes = meter.create_counter(
            "apimw.idempotency.outcomes", unit="{request}",
            description="Requests with a client token, per outcome.",
        )  # fmt: skip
        self.store_duration = meter.create_histogram(
            "apimw.idempotency.store.duration", unit="s",
            description="Duration of the replay store's calls, per operation and whether it failed.",
        )  # fmt: skip

    def microversion(self, outcome: str, version: str) -> None:
        self.microversion_requests.add(1, {"outcome": outcome, "version": version})

    def etag(self, outcome: str) -> None:
        self.etag_outcomes.add(1, {"outcome": outcome})

    def idempotency(self, outcome: str) -> None:
        self.idempotency_outcomes.add(1, {"outcome": outcome})

    def store(self, operation: str, seconds: float, error: bool) -> None:
        self.store_duration.record(seconds, {"operation": operation, "error": error})


# ``METRICS``: one instance on the global meter provider, made on first use
__getattr__ = default_instance(__name__, OpenTelemetryMetrics)
