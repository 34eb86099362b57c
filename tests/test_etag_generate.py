"""Etag generation: canonical JSON, HMAC-SHA-512 / SHA-512, the wire form."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import random
import re
import subprocess
import sys
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from apimw.errors import ConfigError
from apimw.etag import CanonicalizationError, ETagGenerator, canonical_json

# no per-example deadline or speed health check: the CI box is small and shared
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEY = "a-deployment-secret-of-32-bytes!"
GEN = ETagGenerator(key=KEY)
WIRE = re.compile(r'W/"[0-9a-f]{128}"')

json_leaf = st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=12) | st.floats(
    allow_nan=False, allow_infinity=False
)
json_doc = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
resource = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda k: k not in {"etag", "updated_at", "driver_internal_info"}),
    json_doc,
    min_size=1,
    max_size=6,
)


def shuffled(value: Any, rnd: random.Random) -> Any:
    """The same document with every dict's insertion order shuffled (lists kept)."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rnd) for v in value]
    return value


@RELAXED
@given(resource, st.integers())
def test_shuffled_keys_and_nested_dicts_give_the_same_etag(doc: dict[str, Any], seed: int) -> None:
    again = shuffled(doc, random.Random(seed))
    assert GEN.etag(again, "node") == GEN.etag(doc, "node")


@RELAXED
@given(resource, st.data())
def test_any_non_ignored_field_change_changes_the_etag(doc: dict[str, Any], data: st.DataObject) -> None:
    field = data.draw(st.sampled_from(sorted(doc)))
    new_value = data.draw(json_doc)
    assume(canonical_json(new_value) != canonical_json(doc[field]))
    changed = {**doc, field: new_value}
    assert GEN.etag(changed, "node") != GEN.etag(doc, "node")


@RELAXED
@given(resource, json_doc, st.sampled_from(["etag", "updated_at", "driver_internal_info"]))
def test_ignored_field_change_keeps_the_etag(doc: dict[str, Any], value: Any, field: str) -> None:
    assert GEN.etag({**doc, field: value}, "node") == GEN.etag(doc, "node")


def test_ignored_fields_are_per_resource_type() -> None:
    doc = {"uuid": "u", "driver_internal_info": {"a": 1}}
    other = {"uuid": "u", "driver_internal_info": {"a": 2}}
    assert GEN.etag(doc, "node") == GEN.etag(other, "node")
    assert GEN.etag(doc, "port") != GEN.etag(other, "port")
    custom = ETagGenerator(key=KEY, ignored_fields={"port": ["uuid", "etag"]})
    assert custom.etag({"uuid": "x", "a": 1}, "port") == custom.etag({"uuid": "y", "a": 1}, "port")


def test_wire_form_and_digest() -> None:
    doc = {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "name": "n1"}
    tag = GEN.etag(doc, "node")
    assert WIRE.fullmatch(tag)
    assert tag == f'W/"{GEN.digest(doc, "node")}"'
    # HMAC-SHA-512 of the canonical JSON, nothing else
    expected = hmac.new(KEY.encode(), canonical_json(doc), hashlib.sha512).hexdigest()
    assert GEN.digest(doc, "node") == expected
    plain = ETagGenerator(algorithm="sha512")
    assert plain.digest(doc, "node") == hashlib.sha512(canonical_json(doc)).hexdigest()
    assert ETagGenerator(algorithm="sha512", weak=False).etag(doc, "node").startswith('"')


def test_a_different_hmac_key_gives_a_different_tag() -> None:
    doc = {"driver_info": {"ipmi_password": "hunter2"}, "name": "n1"}
    other = ETagGenerator(key="another-secret-32-bytes-long!!!!")
    assert GEN.etag(doc, "node") != other.etag(doc, "node")
    # and the keyed tag is not the public SHA-512 a reader could recompute
    assert GEN.digest(doc, "node") != ETagGenerator(algorithm="sha512").digest(doc, "node")


def test_changing_a_masked_secret_changes_the_tag() -> None:
    a = {"driver_info": {"ipmi_password": "hunter2"}}
    b = {"driver_info": {"ipmi_password": "hunter3"}}
    assert GEN.etag(a, "node") != GEN.etag(b, "node")


def test_canonical_form() -> None:
    doc = {"b": [1, 2.5, {"z": None, "a": True}], "a": "é"}
    assert canonical_json(doc) == '{"a":"é","b":[1,2.5,{"a":true,"z":null}]}'.encode()


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param({"n": 100}, {"n": 100.0}, id="integral-float-is-int"),
        pytest.param({"n": Decimal("100.0")}, {"n": 100}, id="decimal"),
        pytest.param({"n": Decimal("0.5")}, {"n": 0.5}, id="decimal-fraction"),
        pytest.param({"l": (1, 2)}, {"l": [1, 2]}, id="tuple-is-list"),
        pytest.param({"s": {"b", "a", "c"}}, {"s": ["a", "b", "c"]}, id="set-sorted"),
        pytest.param({"u": uuid.UUID(int=5)}, {"u": str(uuid.UUID(int=5))}, id="uuid"),
        pytest.param({1: "x"}, {"1": "x"}, id="int-key-as-json-string"),
        pytest.param(
            {"t": dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.UTC)},
            {"t": dt.datetime(2026, 5, 1, 12, 0, 0)},
            id="aware-utc-equals-naive",
        ),
        pytest.param(
            {"t": dt.datetime(2026, 5, 1, 14, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))},
            {"t": dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.UTC)},
            id="offset-normalised-to-utc",
        ),
    ],
)
def test_equivalent_values_hash_alike(left: dict[Any, Any], right: dict[Any, Any]) -> None:
    assert canonical_json(left) == canonical_json(right)
    assert GEN.etag(left) == GEN.etag(right)


def test_datetime_rendering_and_precision() -> None:
    value = dt.datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
    assert canonical_json({"t": value}) == b'{"t":"2026-05-01T12:00:00.123456Z"}'
    seconds = ETagGenerator(key=KEY, timespec="seconds")
    assert seconds.etag({"t": value}) == seconds.etag({"t": value.replace(microsecond=0)})
    assert GEN.etag({"t": value}) != GEN.etag({"t": value.replace(microsecond=0)})


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(float("nan"), id="nan"),
        pytest.param(float("inf"), id="inf"),
        pytest.param(float("-inf"), id="minus-inf"),
        pytest.param(Decimal("NaN"), id="decimal-nan"),
        pytest.param(object(), id="unknown-type"),
        pytest.param(b"bytes", id="bytes"),
    ],
)
def test_unhashable_values_are_refused_clearly(bad: Any) -> None:
    with pytest.raises(CanonicalizationError):
        GEN.etag({"properties": {"x": [bad]}})


def test_duplicate_keys_after_stringifying_are_refused() -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json({1: "a", "1": "b"})


@RELAXED
@given(resource)
def test_json_round_trip_keeps_the_etag(doc: dict[str, Any]) -> None:
    # What a JSON column gives back after save + reload.
    reloaded = json.loads(json.dumps(doc))
    assert GEN.etag(reloaded) == GEN.etag(doc)


def test_same_etag_across_processes_and_hash_seeds() -> None:
    code = (
        "from apimw.etag import ETagGenerator;"
        f"print(ETagGenerator(key={KEY!r})"
        ".etag({'traits': {'A', 'B', 'C', 'D'}, 'x': {'b': 1, 'a': 2}}))"
    )
    tags = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        tags.add(out.stdout.strip())
    assert len(tags) == 1
    assert tags == {GEN.etag({"traits": {"D", "C", "B", "A"}, "x": {"a": 2, "b": 1}})}


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({}, id="hmac-without-key"),
        pytest.param({"key": "short"}, id="short-key"),
        pytest.param({"key": KEY, "algorithm": "md5"}, id="unknown-algorithm"),
        pytest.param({"key": KEY, "timespec": "nanoseconds"}, id="bad-timespec"),
    ],
)
def test_bad_generator_config(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        ETagGenerator(**kwargs)


def test_repr_never_shows_the_key() -> None:
    assert KEY not in repr(GEN)
