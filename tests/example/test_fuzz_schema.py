"""Schema-driven fuzzing: schemathesis against the live service, per microversion.

The service runs as its own command (``python -m baremetal_service.cli``) on a loopback
port and a temporary SQLite database.  For each version fuzzed, the document is fetched
from the service itself (``GET /v1/openapi.json`` with that version) and every operation
in it gets generated requests, valid (positive) and invalid (negative) ones.  Every
answer must be: no 5xx, a documented status code, the documented content type, the
documented headers and a body matching the documented schema.

Requests run per operation and mode: ``BAREMETAL_FUZZ_EXAMPLES`` (default 6: about 1,900
requests over the two versions, under a minute on 2 cores).  A longer run:

    BAREMETAL_FUZZ_EXAMPLES=200 python -m pytest -q -p no:cacheprovider tests/example/test_fuzz_schema.py

``BAREMETAL_FUZZ_VERSIONS`` (comma-separated, default ``1.1,latest``: the oldest and the newest
document; ``latest`` includes 1.116's etags) picks the versions.  The reliability harness's
``hostile_input`` scenario (``python -m bench.reliability --only hostile_input``) runs the same
fuzzer at more versions and far more requests, on demand.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.servers import cli_service

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("BAREMETAL_FUZZ_EXAMPLES", "6"))
VERSIONS = tuple(v.strip() for v in os.environ.get("BAREMETAL_FUZZ_VERSIONS", "1.1,latest").split(","))
LEGACY = "X-OpenStack-Ironic-API-Version"
#: Body members that name another resource -> the seed that fills them.
BODY_SEEDS = {
    "driver": "driver_name",
    "node_uuid": "node_ident",
    "node": "node_ident",
    "portgroup_uuid": "portgroup_ident",
    "chassis_uuid": "chassis_ident",
}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def live_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service from its CLI on a free loopback port and a fresh SQLite file."""
    workdir = tmp_path_factory.mktemp("fuzz")
    with cli_service(workdir, "--power-sync-interval", "0", "--threads", "4") as service:
        yield service.url


def seed_resources(session: requests.Session, url: str, served: str, doc: dict[str, Any]) -> dict[str, str]:
    """Real resources for the path parameters, so that fuzzing reaches past the 404s."""
    headers = {LEGACY: served}
    paths = doc["paths"]

    def post(path: str, body: Any) -> dict[str, Any]:
        if path not in paths:
            return {}
        resp = session.post(url + path, json=body, headers=headers, timeout=10)
        assert resp.status_code == 201, (path, resp.status_code, resp.text)
        return dict(resp.json())

    seeds: dict[str, str] = {"driver_name": "fake-hardware", "trait": "CUSTOM_FUZZ", "vif_id": "fuzz-vif",
                             "resource_class": "CUSTOM_FUZZ"}  # fmt: skip
    node = post("/v1/nodes", {"driver": "fake-hardware"})
    seeds["node_ident"] = node["uuid"]
    seeds["port_ident"] = post("/v1/ports", {"address": _mac(served), "node_uuid": node["uuid"]})["uuid"]
    seeds["chassis_ident"] = post("/v1/chassis", {"description": "fuzz"})["uuid"]
    for key, path, body in (
        ("portgroup_ident", "/v1/portgroups", {"node_uuid": node["uuid"]}),
        ("connector_ident", "/v1/volume/connectors",
         {"node_uuid": node["uuid"], "type": "iqn", "connector_id": f"iqn.fuzz.{served}"}),
        ("target_ident", "/v1/volume/targets",
         {"node_uuid": node["uuid"], "volume_type": "iscsi", "volume_id": f"v-{served}", "boot_index": 0}),
        ("allocation_ident", "/v1/allocations", {"resource_class": "fuzz"}),
        ("deploy_template_ident", "/v1/deploy_templates",
         {"name": f"CUSTOM_FUZZ_{served.replace('.', '_')}",
          "steps": [{"interface": "bios", "step": "apply", "args": {}, "priority": 10}]}),
        ("runbook_ident", "/v1/runbooks",
         {"name": f"CUSTOM_RB_{served.replace('.', '_')}",
          "steps": [{"interface": "bios", "step": "apply", "args": {}, "order": 1}]}),
        ("inspection_rule_ident", "/v1/inspection_rules",
         {"actions": [{"op": "set-attribute", "args": ["/extra/fuzz", 1]}]}),
    ):  # fmt: skip
        created = post(path, body)
        if created:
            seeds[key] = created["uuid"]
    if "/v1/conductors" in paths:
        conductors = session.get(url + "/v1/conductors", headers=headers, timeout=10).json()["conductors"]
        if conductors:
            seeds["hostname"] = conductors[0]["hostname"]
    return seeds


def _mac(served: str) -> str:
    n = zlib.crc32(served.encode()) & 0xFFFFFF
    return "52:54:00:" + ":".join(f"{(n >> s) & 0xFF:02x}" for s in (16, 8, 0))


def operation_order(op: Any) -> tuple[int, str]:
    # deletes last, so the seeded resources live through the rest
    return (1 if op.method.lower() == "delete" else 0, op.path)


def prepare_case(case: Any, seeds: dict[str, str], served: str) -> None:
    """Point a generated case at the seeded resources and send it at *served* (in place).

    Two cases in three name the seeded resources (chosen from the case itself: repeatable),
    in the path and in the body's references, so that fuzzing reaches past 404s and 400s.
    """
    drawn = json.dumps([case.path_parameters, case.body], default=str, sort_keys=True)
    if zlib.crc32(drawn.encode()) % 3:
        for name in list(case.path_parameters or {}):
            if name in seeds:
                case.path_parameters[name] = seeds[name]
        if isinstance(case.body, dict):
            for name, seed in BODY_SEEDS.items():
                if name in case.body and seed in seeds:
                    case.body[name] = seeds[seed]
    headers = dict(case.headers or {})
    headers.pop("OpenStack-API-Version", None)
    headers[LEGACY] = served
    case.headers = headers


@pytest.mark.parametrize("version", VERSIONS)
def test_fuzz_the_live_service_against_its_document(live_service: str, version: str) -> None:
    session = requests.Session()
    try:
        resp = session.get(live_service + "/v1/openapi.json", headers={LEGACY: version}, timeout=30)
        assert resp.status_code == 200, resp.text
        doc = resp.json()
        served = doc["info"]["version"]
        seeds = seed_resources(session, live_service, served, doc)
        schema = schemathesis.openapi.from_dict(doc)
        operations = sorted((r.ok() for r in schema.get_all_operations()), key=operation_order)
        counts = {"requests": 0}
        failures: list[str] = []
        timings: list[tuple[float, int, str]] = []

        for op in operations:
            for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
                label = f"{op.method.upper()} {op.path} [{mode.value}]"
                started, before = time.monotonic(), counts["requests"]
                try:
                    _fuzz(op, mode, live_service, session, served, seeds, counts)
                except Exception as exc:  # collect every operation's failure, then fail once
                    failures.append(f"{label}: {str(exc)[:3000]}")
                timings.append((time.monotonic() - started, counts["requests"] - before, label))
        classes = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "requests")
        summary = f"version {served}: {counts['requests']} requests, {len(operations)} operations ({classes})"
        slowest = ", ".join(f"{label} {n} in {t:.1f}s" for t, n, label in sorted(timings)[-5:])
        print(f"{summary}; slowest: {slowest}")  # noqa: T201 - the numbers are the point of -s
        assert not failures, summary + "\n\n" + "\n\n".join(failures)
        assert counts["requests"] >= len(operations)
    finally:
        session.close()


def _fuzz(
    op: Any,
    mode: Any,
    url: str,
    session: requests.Session,
    served: str,
    seeds: dict[str, str],
    counts: dict[str, int],
) -> None:
    @given(case=op.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    def run(case: Any) -> None:
        prepare_case(case, seeds, served)
        response = case.call(base_url=url, session=session, timeout=15)
        counts["requests"] += 1
        counts[f"{response.status_code // 100}xx"] = counts.get(f"{response.status_code // 100}xx", 0) + 1
        case.validate_response(response, checks=CHECKS)

    run()
