"""Metrics hooks: each middleware reports its outcomes through ``metrics=``.

Every test runs a real stack (microversion -> idempotency -> etag -> a small resource app),
sends the requests behind one outcome family, then scrapes what an operator would see:
``prometheus_client.generate_latest`` parsed back, or OpenTelemetry's in-memory reader.
Each runs against the WSGI middlewares and their ASGI twins (``tests/asgi_support.py``).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from apimw import etag, idempotency, microversion
from apimw.errors import ConfigError
from apimw.etag import ETagMiddleware, StaleEtag, format_etag, mark_enforced, set_response_etag
from apimw.idempotency import IdempotencyMiddleware
from apimw.metrics import Metrics, NoMetrics, as_metrics
from apimw.metrics_otel import OpenTelemetryMetrics
from apimw.metrics_prometheus import PrometheusMetrics
from apimw.microversion import MicroversionMiddleware
from tests.asgi_support import flavours, layered
from tests.idempotency_support import Answer, call, environ_for, private_server
from tests.servers import Server, make_workdir

pytest_generate_tests = flavours()

ETAG_1 = format_etag("a" * 128)
ETAG_2 = format_etag("b" * 128)


class NodeApp:
    """``/v1/nodes/n1`` (GET with its etag, PUT enforcing If-Match) and ``POST /v1/nodes``."""

    def __init__(self) -> None:
        self.current = ETAG_1
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        if method == "PUT":
            cond = environ.get(etag.ENVIRON_IF_MATCH)
            if cond is not None:
                if not cond.matches(self.current):
                    raise StaleEtag()
                mark_enforced(environ)
        if method == "POST":
            environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            self.entered.set()
            self.release.wait(10)
        set_response_etag(environ, self.current)
        body = json.dumps({"uuid": "n1"}).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response("201 Created" if method == "POST" else "200 OK", headers)
        return [body]


def stack(
    flavour: str, metrics: Metrics, app: NodeApp | None = None, *, store: str = "memory://", **mv: Any
) -> Any:
    """microversion -> idempotency -> etag -> *app*, WSGI or ASGI, every layer told *metrics*."""
    options: dict[str, Any] = {"service_type": "baremetal", "min_version": "1.1", "max_version": "1.90"}
    options.update(mv)
    etag_options = dict(
        min_version="1.1", enforces=["PUT"], require_if_match=["PUT /v1/nodes"], not_modified=True,
        current_etag=lambda environ: ETAG_1, metrics=metrics,
    )  # fmt: skip
    idem_options = dict(
        store=store, scope="shared", key_prefix=f"m{uuid.uuid4().hex[:8]}:", lease=5, metrics=metrics
    )
    return layered(
        flavour, app or NodeApp(),
        (MicroversionMiddleware, {**options, "metrics": metrics}),
        (IdempotencyMiddleware, idem_options),
        (ETagMiddleware, etag_options),
    )  # fmt: skip


def request(
    app: Any,
    path: str = "/v1/nodes/n1",
    *,
    method: str = "GET",
    version: str | None = "1.50",
    token: str | None = None,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> Answer:
    hdrs = dict(headers or {})
    if version is not None:
        hdrs["OpenStack-API-Version"] = f"baremetal {version}"
    return call(app, environ_for(path, method=method, body=body, token=token, headers=hdrs))


def scrape(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The registry's exposition text, parsed: ``(sample name, labels) -> value``."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def counts(registry: CollectorRegistry, name: str, label: str = "outcome") -> dict[str, float]:
    """``{label value: count}`` of the counter *name* (``..._total``)."""
    return {
        dict(labels)[label]: value
        for (sample, labels), value in scrape(registry).items()
        if sample == name and value
    }


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> PrometheusMetrics:
    return PrometheusMetrics(registry=registry)


# -- microversion -------------------------------------------------------------------------


def test_refused_versions_are_counted_per_reason(
    flavour: str, registry: CollectorRegistry, metrics: PrometheusMetrics
) -> None:
    app = stack(flavour, metrics)
    assert request(app, version="1.91").status == 406
    assert request(app, version="2.0").status == 406
    assert request(app, version="1.x").status == 400
    samples = scrape(registry)
    total = "apimw_microversion_requests_total"
    assert samples[(total, frozenset({("outcome", "unsupported"), ("version", "")}))] == 2
    assert samples[(total, frozenset({("outcome", "malformed"), ("version", "")}))] == 1


def test_served_versions_are_counted_per_version_deprecated_ones_apart(
    flavour: str, registry: CollectorRegistry, metrics: PrometheusMetrics
) -> None:
    app = stack(flavour, metrics, deprecated_below="1.20", deprecated_since="2026-01-01")
    for version in ("1.50", "1.50", "latest", None, "1.19", "1.20"):
        assert request(app, version=version).status == 200
    samples = scrape(registry)
    total = "apimw_microversion_requests_total"
    found = {(dict(k)["outcome"], dict(k)["version"]): v for (n, k), v in samples.items() if n == total}
    assert found == {("served", "1.50"): 2, ("served", "1.90"): 1, ("served", "1.20"): 1,
                     ("deprecated", "1.1"): 1, ("deprecated", "1.19"): 1}  # fmt: skip


# -- etag -----------------------------------------------------------------------------------


def test_etag_answers_are_counted_412_428_304_400(
    flavour: str, registry: CollectorRegistry, metrics: PrometheusMetrics
) -> None:
    app = stack(flavour, metrics)
    body = b'{"name": "x"}'
    assert request(app, method="PUT", headers={"If-Match": ETAG_2}, body=body).status == 412  # the pre-check
    assert request(app, method="PUT", path="/v1/nodes", body=body).status == 428
    assert request(app, headers={"If-None-Match": ETAG_1}).status == 304
    assert request(app, headers={"If-None-Match": ETAG_1}).status == 304
    assert request(app, method="PUT", headers={"If-Match": "not-an-etag"}, body=body).status == 400
    assert request(app, method="PUT", headers={"If-Match": ETAG_1}, body=body).status == 200  # not reported
    assert request(app).status == 200  # a plain GET passes through: not reported
    assert counts(registry, "apimw_etag_outcomes_total") == {
        "precondition-failed": 1, "if-match-required": 1, "not-modified": 2, "if-match-malformed": 1,
    }  # fmt: skip


def test_a_stale_etag_the_app_raises_is_counted_as_412(
    flavour: str, registry: CollectorRegistry, metrics: PrometheusMetrics
) -> None:
    node = NodeApp()
    node.current = ETAG_2  # the pre-check says ETAG_1 matches; the app's own data says it is stale
    app = stack(flavour, metrics, node)
    assert request(app, method="PUT", headers={"If-Match": ETAG_1}, body=b"{}").status == 412
    assert counts(registry, "apimw_etag_outcomes_total") == {"precondition-failed": 1}


# -- idempotency ----------------------------------------------------------------------------


def test_claims_replays_and_mismatches_are_counted(
    flavour: str, registry: CollectorRegistry, metrics: PrometheusMetrics
) -> None:
    app = stack(flavour, metrics)
    first = request(app, "/v1/nodes", method="POST", token="t-1", body=b'{"name": "a"}')
    again = request(app, "/v1/nodes", method="POST", token="t-1", body=b'{"name": "a"}')
    other = request(app, "/v1/nodes", method="POST", token="t-1", body=b'{"name": "b"}')
    assert (first.status, again.status, other.status) == (201, 201, 409)
    assert again.header("Idempotent-Replayed") == "true"
    assert request(app, "/v1/nodes", method="POST", token="", body=b"{}").status == 400
    assert counts(registry, "apimw_idempotency_outcomes_total") == {
        "claimed": 1, "replayed": 1, "fingerprint-mismatch": 1, "token-invalid": 1,
    }  # fmt: skip


def test_a_request_in_flight_is_counted(
    flavour: str, registry: CollectorRegistry, metrics: PrometheusMetrics
) -> None:
    node = NodeApp()
    node.release.clear()
    app = stack(flavour, metrics, node)
    answers: list[Answer] = []
    first = threading.Thread(
        target=lambda: answers.append(request(app, "/v1/nodes", method="POST", token="t-2", body=b"{}"))
    )
    first.start()
    try:
        assert node.entered.wait(10)
        assert request(app, "/v1/nodes", method="POST", token="t-2", body=b"{}").status == 409
    finally:
        node.release.set()
        first.join(10)
    assert [a.status for a in answers] == [201]
    assert counts(registry, "apimw_idempotency_outcomes_total") == {"in-flight": 1, "claimed": 1}


def test_store_calls_are_timed_per_operation(
    flavour: str, registry: CollectorRegistry, metrics: PrometheusMetrics
) -> None:
    app = stack(flavour, metrics)
    for n in range(3):
        assert request(app, "/v1/nodes", method="POST", token=f"t-{n}", body=b"{}").status == 201
    assert request(app, "/v1/nodes", method="POST", token="t-0", body=b"{}").status == 201  # a replay
    histogram = counts(registry, "apimw_idempotency_store_seconds_count", "operation")
    assert histogram == {"claim": 4, "complete": 3}
    sums = counts(registry, "apimw_idempotency_store_seconds_sum", "operation")
    assert 0 < sums["claim"] < 1
    assert counts(registry, "apimw_idempotency_store_errors_total", "operation") == {}


@pytest.fixture
def redis() -> Iterator[Server]:
    """A private Redis of our own, to stop mid-test."""
    server = private_server("redis", make_workdir("metrics-redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_store_that_is_down_is_counted_as_errors_and_503(
    flavour: str, registry: CollectorRegistry, metrics: PrometheusMetrics, redis: Server
) -> None:
    app = stack(flavour, metrics, store=redis.url)
    assert request(app, "/v1/nodes", method="POST", token="t-up", body=b"{}").status == 201
    redis.stop()
    try:
        down = request(app, "/v1/nodes", method="POST", token="t-down", body=b"{}")
    finally:
        redis.start()
    assert (down.status, down.code) == (503, "idempotency.store-unavailable")
    assert counts(registry, "apimw_idempotency_outcomes_total") == {"claimed": 1, "store-unavailable": 1}
    assert counts(registry, "apimw_idempotency_store_errors_total", "operation") == {"claim": 1}
    assert counts(registry, "apimw_idempotency_store_seconds_count", "operation") == {
        "claim": 2,
        "complete": 1,
    }


# -- OpenTelemetry, the option's forms, the default ----------------------------------------------


def test_opentelemetry_instruments_carry_the_same_outcomes(
    flavour: str,
) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    app = stack(flavour, OpenTelemetryMetrics(meter=provider.get_meter("apimw")))
    assert request(app, version="1.91").status == 406
    assert request(app, headers={"If-None-Match": ETAG_1}).status == 304
    assert request(app, "/v1/nodes", method="POST", token="t-o", body=b"{}").status == 201
    assert request(app, "/v1/nodes", method="POST", token="t-o", body=b"{}").status == 201
    points: dict[str, dict[frozenset[tuple[str, Any]], Any]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    points.setdefault(metric.name, {})[frozenset(point.attributes.items())] = (
                        value if value is not None else point.count
                    )
    assert points["apimw.microversion.requests"] == {
        frozenset({("outcome", "unsupported"), ("version", "")}): 1,
        frozenset({("outcome", "served"), ("version", "1.50")}): 3,
    }
    assert points["apimw.etag.outcomes"] == {frozenset({("outcome", "not-modified")}): 1}
    assert points["apimw.idempotency.outcomes"] == {
        frozenset({("outcome", "claimed")}): 1, frozenset({("outcome", "replayed")}): 1,
    }  # fmt: skip
    assert points["apimw.idempotency.store.duration"] == {
        frozenset({("operation", "claim"), ("error", False)}): 2,
        frozenset({("operation", "complete"), ("error", False)}): 1,
    }


class Recorder(NoMetrics):
    """Only the microversion outcomes, for the paste form below."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def microversion(self, outcome: str, version: str) -> None:
        self.seen.append((outcome, version))


RECORDER = Recorder()


def test_paste_names_the_metrics_object_to_import() -> None:
    factory = microversion.filter_factory(
        {},
        service_type="baremetal",
        min_version="1.1",
        max_version="1.9",
        metrics="tests.test_metrics:RECORDER",
    )
    app = factory(NodeApp())
    before = len(RECORDER.seen)
    assert request(app, version="1.5").status == 200
    assert RECORDER.seen[before:] == [("served", "1.5")]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("tests.test_metrics:NOWHERE", "cannot import 'tests.test_metrics:NOW", id="missing"),
        pytest.param("tests.test_metrics", "expected 'package.module:attribute'", id="no-attribute"),
        pytest.param("tests.test_metrics:NodeApp", "lacks microversion, etag, idempotency", id="not-metrics"),
        pytest.param(object(), "lacks microversion, etag, idempotency, store", id="object"),
    ],
)  # fmt: skip
def test_a_bad_metrics_option_fails_at_construction(value: Any, message: str) -> None:
    for build in (
        lambda: MicroversionMiddleware(NodeApp(), service_type="baremetal", min_version="1.1",
                                       max_version="1.9", metrics=value),
        lambda: ETagMiddleware(NodeApp(), metrics=value),
        lambda: IdempotencyMiddleware(NodeApp(), metrics=value),
    ):  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            build()


def test_metrics_is_not_an_oslo_config_option() -> None:
    """It names code to import: code or paste only, never a deployment's configuration files."""
    for module in (microversion, etag, idempotency):
        assert [opt.name for opt in module.OPTIONS if opt.name == "metrics" and not opt.oslo] == ["metrics"]


def test_without_metrics_the_store_is_called_directly() -> None:
    """The default reports nothing and adds no wrapper around the store's calls."""
    mw = IdempotencyMiddleware(NodeApp())
    assert mw.metrics is None and mw._calls is mw.store
    assert as_metrics(None) is None and as_metrics("") is None


def test_the_docs_page_lists_every_prometheus_metric(registry: CollectorRegistry) -> None:
    PrometheusMetrics(registry=registry)
    names = {family.name for family in text_string_to_metric_families(generate_latest(registry).decode())}
    page = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text()
    for name in names:
        suffix = "" if name.endswith("_seconds") else "_total"
        assert f"`{name}{suffix}`" in page, name
