"""The compiled schema checks (api/fast_schema.py) accept exactly what jsonschema accepts
(with the service's ``pattern``, ECMA-262's ``$``: api/json_schema.py).

A Hypothesis property over generated documents for every request schema the node, port
and state endpoints use (wrong types, too long strings, pattern misses, null where it is
not allowed, unknown and missing keys, booleans as numbers...); the API's 400s are the
same bytes with the compiled checks on and off; the switch is a setting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from baremetal_service.api import create_flask_app, schemas, versions
from baremetal_service.api.fast_schema import compile_schema
from baremetal_service.api.json_schema import Validator
from baremetal_service.service import BaremetalService
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.test import Client

SCHEMAS = {
    "node": schemas.NODE_CREATE,
    "patch": schemas.PATCH,
    "port": schemas.PORT_CREATE,
    "portgroup": schemas.PORTGROUP_CREATE,
    "chassis": schemas.CHASSIS_CREATE,
    "provision": schemas.PROVISION,
    "power": schemas.POWER,
    "maintenance": schemas.MAINTENANCE,
    "resource_class": schemas.RESOURCE_CLASS_CREATE,
}

_text = st.one_of(
    st.text(max_size=8),
    st.text(alphabet="abcXYZ019-._~:", min_size=0, max_size=12),  # name / group patterns
    st.text(alphabet="0123456789abcdefABCDEF-", min_size=30, max_size=38),  # uuid pattern edges
    st.sampled_from(["fake-hardware", "add", "replace", "remove", "move", "/extra/x", "/a~1b", "/",
                     "x" * 80, "x" * 81, "y" * 255, "y" * 256, "z" * 4096, "z" * 4097, "a\n", "é" * 255,
                     "52:54:00:00:00:01", "52-54-00-00-00-0g", "CUSTOM_A1", "custom_a"]),
)  # fmt: skip
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, 1.0, 2.5, -1, True, False]), _text,
)  # fmt: skip
_json = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)),
    max_leaves=6,
)


def _near(sub: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values at the edges of one property's schema: its length limits (on both sides, in
    its pattern's alphabet and out of it), its enum, its minimum, or any JSON value."""
    edges: list[Any] = []
    for key in ("maxLength", "minLength"):
        if key in sub:
            n = sub[key]
            edges += ["a" * max(n - 1, 0), "a" * n, "a" * (n + 1), "a b" + "c" * max(n - 2, 0), "é" * n]
    if "minimum" in sub:
        m = sub["minimum"]
        edges += [m - 1, m, m + 1, float(m), m - 0.5, True, False]
    edges += list(sub.get("enum", []))
    return st.one_of(st.sampled_from(edges), _json) if edges else _json


def _documents(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Objects with a mix of the schema's own keys (values near their limits or any JSON value),
    unknown keys, missing required ones, or anything."""
    props = schema.get("properties", {})
    if props:
        own = st.fixed_dictionaries({}, optional={name: _near(sub) for name, sub in props.items()})
        extra = st.dictionaries(_text, _json, max_size=2)
        objects = st.one_of(own, st.builds(lambda a, b: {**b, **a}, own, extra))
    else:
        objects = st.dictionaries(_text, _json, max_size=8)
    if schema is schemas.PATCH:
        ops = st.fixed_dictionaries(
            {"op": st.one_of(st.sampled_from(["add", "replace", "remove", "move"]), _scalar),
             "path": st.one_of(_text, st.sampled_from(["/extra/x", "/name", "//", "/a b"]))},
            optional={"value": _json, "from": _text},
        )  # fmt: skip
        return st.one_of(st.lists(ops, max_size=3), st.lists(objects, max_size=2), _json)
    return st.one_of(objects, _json)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_request_schema_of_the_write_paths_compiles(name: str) -> None:
    assert compile_schema(SCHEMAS[name]) is not None


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compiled_checks_agree_with_jsonschema(name: str, data: st.DataObject) -> None:
    schema = SCHEMAS[name]
    check = compile_schema(schema)
    assert check is not None
    validator = Validator(schema)
    doc = data.draw(_documents(schema))
    assert check(doc) == validator.is_valid(doc), doc


def test_known_edges_agree_with_jsonschema() -> None:
    node = schemas.NODE_CREATE
    check = compile_schema(node)
    assert check is not None
    validator = Validator(node)
    cases: list[Any] = [
        {"driver": "fake-hardware"}, {}, {"driver": ""}, {"driver": None}, {"driver": "x" * 256},
        {"driver": "d", "name": "a b"}, {"driver": "d", "name": "node-1\n"}, {"driver": "d", "name": None},
        {"driver": "d", "maintenance": None}, {"driver": "d", "maintenance": 1}, {"driver": "d", "extra": []},
        {"driver": "d", "unknown": 1}, {"driver": "d", "uuid": "not-a-uuid-but-32-characters-long"},
        {"driver": "d", "conductor_group": "a b"}, {"driver": "d", "resource_class": "r" * 81},
        {"driver": "d", "automated_clean": None}, [], "node", None,
    ]  # fmt: skip
    for doc in cases:
        assert check(doc) == validator.is_valid(doc), doc
    # a trailing newline passes no pattern (ECMA-262's "$"), in either validator
    for doc in ({"driver": "d", "name": "node-1\n"}, {"driver": "d", "conductor_group": "g\n"}):
        assert not check(doc) and not validator.is_valid(doc), doc
    power = compile_schema(schemas.POWER)
    assert power is not None
    for timeout in (1, 0, 1.0, 0.5, True, None, "1"):  # an integral float is an integer; a bool is not
        doc = {"target": "power on", "timeout": timeout}
        assert power(doc) == Validator(schemas.POWER).is_valid(doc), timeout


def test_an_unknown_keyword_is_left_to_jsonschema() -> None:
    assert compile_schema({"type": "object", "patternProperties": {"^a": {}}}) is None
    assert compile_schema({"type": "string", "enum": [1, True]}) is None
    assert compile_schema({"anyOf": [{"type": "string"}]}) is None


def _answers(database_url: str, fast: bool, requests: list[tuple[str, str, Any]]) -> list[tuple[int, bytes]]:
    service = BaremetalService(database_url, conductor_workers=0)
    try:
        client = Client(create_flask_app(service, fast_validation=fast))
        latest = {"apimw.microversion": versions.MAX_VERSION}  # what the microversion middleware sets
        body = {"driver": "fake-hardware", "name": "n1"}
        created = client.post("/v1/nodes", json=body, environ_base=latest)
        node = json.loads(created.get_data())
        out = []
        for method, path, body in requests:
            resp = client.open(path.format(node=node["uuid"]), method=method, json=body, environ_base=latest)
            out.append((resp.status_code, resp.get_data()))
        return out
    finally:
        service.close()


def test_the_api_answers_the_same_with_and_without_compiled_checks(tmp_path: Path) -> None:
    requests: list[tuple[str, str, Any]] = [
        ("POST", "/v1/nodes", {"driver": "fake-hardware", "name": "a b"}),
        ("POST", "/v1/nodes", {"driver": "fake-hardware", "name": "x" * 300, "extra": []}),
        ("POST", "/v1/nodes", {"name": "n2"}),
        ("POST", "/v1/nodes", {"driver": "fake-hardware", "bogus": 1}),
        ("POST", "/v1/nodes", {"driver": "fake-hardware", "name": "n3", "maintenance": "yes"}),
        ("PATCH", "/v1/nodes/{node}", [{"op": "add", "path": "/extra/x", "value": 1}]),
        ("PATCH", "/v1/nodes/{node}", [{"op": "replace", "path": "/maintenance", "value": "yes"}]),
        ("PATCH", "/v1/nodes/{node}", [{"op": "replace", "path": "/name", "value": "b" * 256}]),
        ("PATCH", "/v1/nodes/{node}", [{"op": "move", "path": "/name"}]),
        ("PATCH", "/v1/nodes/{node}", [{"op": "add", "path": "/conductor_group", "value": "a b"}]),
        ("PATCH", "/v1/nodes/{node}", {"op": "add"}),
        ("PUT", "/v1/nodes/{node}/states/power", {"target": "power on", "timeout": 0}),
    ]
    fast = _answers(f"sqlite:///{tmp_path / 'fast.db'}", True, requests)
    slow = _answers(f"sqlite:///{tmp_path / 'slow.db'}", False, requests)
    assert [status for status, _ in fast] == [400, 400, 400, 400, 400, 200, 400, 400, 400, 400, 400, 400]
    for (status, body), (_, other) in zip(fast, slow, strict=True):
        if status == 200:  # the documents differ by their uuid and times only
            assert set(json.loads(body)) == set(json.loads(other))
        else:
            assert body == other


def test_jsonschema_stays_selectable() -> None:
    from baremetal_service.wsgi import settings as wsgi_settings

    assert wsgi_settings({})["fast_validation"] is True
    assert wsgi_settings({"BAREMETAL_FAST_VALIDATION": "false"})["fast_validation"] is False
