"""Request bodies: fastjsonschema's verdict is jsonschema's, and every refused body is a 400
with a clear JSON error body and a stable code (handlers/common.py's ``validate``).

fastjsonschema judges each body (the schema compiled once, its patterns with ECMA-262's
``$``: handlers/json_schema.py); jsonschema words the 400.  A Hypothesis property over
generated documents for every request schema the node, port and state endpoints use
(wrong types, too long strings, pattern misses, null where it is not allowed, unknown and
missing keys, booleans as numbers...) keeps the two verdicts the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.test import Client

from baremetal_service import schemas, versions
from baremetal_service.handlers.common import accepts
from baremetal_service.handlers.json_schema import Validator
from baremetal_service.handlers.routes import create_flask_app
from baremetal_service.objects.service import BaremetalService

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
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_verdict_agrees_with_jsonschema(name: str, data: st.DataObject) -> None:
    schema = SCHEMAS[name]
    validator = Validator(schema)
    doc = data.draw(_documents(schema))
    assert accepts(doc, schema) == validator.is_valid(doc), doc


def test_known_edges_agree_with_jsonschema() -> None:
    node = schemas.NODE_CREATE
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
        assert accepts(doc, node) == validator.is_valid(doc), doc
    # a trailing newline passes no pattern (ECMA-262's "$"), in either validator
    for doc in ({"driver": "d", "name": "node-1\n"}, {"driver": "d", "conductor_group": "g\n"}):
        assert not accepts(doc, node) and not validator.is_valid(doc), doc
    for timeout in (1, 0, 1.0, 0.5, True, None, "1"):  # an integral float is an integer; a bool is not
        doc = {"target": "power on", "timeout": timeout}
        assert accepts(doc, schemas.POWER) == Validator(schemas.POWER).is_valid(doc), timeout


def test_the_body_is_not_changed_and_formats_are_annotations() -> None:
    # fastjsonschema fills in defaults and asserts formats unless told not to
    schema = {"type": "object", "properties": {"a": {"type": "string", "default": "x"},
                                               "u": {"type": "string", "format": "uuid"}}}  # fmt: skip
    doc: dict[str, Any] = {"u": "not-a-uuid"}
    assert accepts(doc, schema) and doc == {"u": "not-a-uuid"}


def _answers(database_url: str, requests: list[tuple[str, str, Any]]) -> list[tuple[int, bytes]]:
    service = BaremetalService(database_url, conductor_workers=0)
    try:
        client = Client(create_flask_app(service))
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


def test_every_bad_body_is_a_400_worded_by_jsonschema(tmp_path: Path) -> None:
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
    answers = _answers(f"sqlite:///{tmp_path / 'v.db'}", requests)
    assert [status for status, _ in answers] == [400, 400, 400, 400, 400, 200, 400, 400, 400, 400, 400, 400]
    for status, body in answers:
        if status != 400:
            continue
        problem = json.loads(json.loads(body)["error_message"])
        assert problem["code"] == 400
        assert problem["faultstring"].startswith("Schema error for "), problem
    first = json.loads(json.loads(answers[0][1])["error_message"])["faultstring"]
    assert first == r"Schema error for node: 'a b' does not match '^[a-zA-Z0-9\\-._~]+$' (at /name)"
