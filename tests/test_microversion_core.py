"""The microversion core's decisions, without WSGI or ASGI: request facts in, a named decision out."""

from __future__ import annotations

from typing import Any

import pytest

from apimw import Version
from apimw.microversion import Discover, MicroversionCore, Refuse, Serve

OPTIONS: dict[str, Any] = {
    "service_type": "baremetal",
    "min_version": "1.1",
    "max_version": "1.115",
    "legacy_header": "X-OpenStack-Ironic-API-Version",
    "error_profile": "ironic",
}


def core(**options: Any) -> MicroversionCore:
    return MicroversionCore(**{**OPTIONS, **options})


def test_a_served_request_names_its_version_and_the_headers_both_ways() -> None:
    decision = core().decide("GET", "/v1/nodes", "baremetal 1.80", None)
    assert type(decision) is Serve
    assert decision.version == Version(1, 80)
    assert (decision.standard, decision.legacy) == ("baremetal 1.80", "1.80")
    assert dict(decision.headers)["X-OpenStack-Ironic-API-Maximum-Version"] == "1.115"
    assert decision.headers[-1] == ("Vary", "OpenStack-API-Version, X-OpenStack-Ironic-API-Version")
    # in bytes: the client sent the standard header as served, only the legacy line is added
    assert decision.raw_dropped == frozenset()
    assert decision.raw_added == ((b"x-openstack-ironic-api-version", b"1.80"),)


@pytest.mark.parametrize(
    ("standard", "legacy", "status", "code"),
    [
        pytest.param("baremetal 9.99", None, 406, "microversion.unsupported", id="unsupported"),
        pytest.param(None, "1.x", 406, "microversion.malformed", id="malformed-legacy"),
        pytest.param(None, "1." + "1" * 2000, 406, "microversion.malformed", id="legacy-too-long"),
        pytest.param("baremetal " + "1" * 2000, None, 406, "microversion.malformed", id="standard-too-long"),
    ],
)
def test_a_refused_request_names_its_problem_and_the_range(
    standard: str | None, legacy: str | None, status: int, code: str
) -> None:
    decision = core().decide("GET", "/v1/nodes", standard, legacy)
    assert type(decision) is Refuse
    assert (decision.problem.status, decision.problem.code) == (status, code)
    assert ("X-OpenStack-Ironic-API-Minimum-Version", "1.1") in decision.headers


def test_malformed_is_400_in_the_api_sig_profile() -> None:
    decision = core(error_profile="api-sig").decide("GET", "/", "baremetal one", None)
    assert type(decision) is Refuse and decision.problem.status == 400


@pytest.mark.parametrize(
    ("method", "path", "kind"),
    [
        pytest.param("GET", "/", "root", id="root"),
        pytest.param("HEAD", "/v1", "major", id="major-head"),
        pytest.param("GET", "/v1/", "major", id="major-slash"),
        pytest.param("POST", "/v1", None, id="post-is-the-apps"),
        pytest.param("GET", "/v1/nodes", None, id="a-resource"),
    ],
)
def test_discovery_paths_are_answered_by_the_core(method: str, path: str, kind: str | None) -> None:
    mv = core(discovery=True, discovery_resources=["nodes", "portgroups:1.24"])
    decision = mv.decide(method, path, None, "1.30")
    if kind is None:
        assert type(decision) is Serve
        return
    assert type(decision) is Discover and decision.kind == kind
    headers, body = mv.document(decision, method, "https://bm.example/api")
    assert ("X-OpenStack-Ironic-API-Version", "1.30") in headers
    assert (body == b"") is (method == "HEAD")
    if kind == "major" and body:
        assert b"https://bm.example/api/v1/portgroups/" in body


def test_the_apps_headers_are_merged_with_ours_into_one_vary() -> None:
    mv = core()
    decision = mv.decide("GET", "/v1/nodes", None, None)
    assert type(decision) is Serve
    merged = mv.response_headers([("Vary", "Accept"), ("X-OpenStack-Ironic-API-Version", "9.9")], decision)
    assert [v for k, v in merged if k == "Vary"] == [
        "Accept, OpenStack-API-Version, X-OpenStack-Ironic-API-Version"
    ]
    assert [v for k, v in merged if k.lower() == "x-openstack-ironic-api-version"] == ["1.1"]


def test_metrics_are_told_each_decision() -> None:
    told: list[tuple[str, str]] = []

    class Recorder:
        def microversion(self, outcome: str, version: str) -> None:
            told.append((outcome, version))

        def etag(self, outcome: str) -> None: ...
        def idempotency(self, outcome: str) -> None: ...
        def store(self, operation: str, seconds: float, error: bool) -> None: ...

    mv = core(metrics=Recorder())
    for _ in range(2):  # the second answer comes from the kept decision, and is told too
        mv.decide("GET", "/", "baremetal 1.5", None)
        mv.decide("GET", "/", "baremetal 9.9", None)
    assert told == [("served", "1.5"), ("unsupported", "")] * 2
