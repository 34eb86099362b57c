"""Every schema ``pattern`` means what ECMA-262 means by ``$``.

Python's ``re`` lets ``$`` match before a trailing newline: ``^CUSTOM_[A-Z0-9_]+$`` accepted
``"CUSTOM_X\\n"``.  Both validators (the verdict, fastjsonschema through
:func:`baremetal_service.handlers.common.accepts`, and jsonschema through :data:`Validator`,
which words the 400) now refuse it, for every pattern of every schema the service holds or
publishes -- found by walking them, not listed here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import baremetal_service
from apimw.errors import HTTPProblem
from baremetal_service import openapi
from baremetal_service.handlers.common import accepts, validate
from baremetal_service.handlers.json_schema import Validator, ecma_regex, ecma_source
from baremetal_service.objects.catalog import declarations


def _modules() -> Iterator[Any]:
    for info in pkgutil.walk_packages(baremetal_service.__path__, "baremetal_service."):
        if info.name.split(".")[-1] in ("__main__", "gunicorn_conf"):
            continue  # entry points that start something when imported
        if ".migrations" in info.name:
            continue  # alembic's scripts
        yield importlib.import_module(info.name)


MODULES = list(_modules())


def _patterns(schema: Any) -> Iterator[str]:
    if isinstance(schema, Mapping):
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            yield pattern
        for value in schema.values():
            yield from _patterns(value)
    elif isinstance(schema, list | tuple):
        for value in schema:
            yield from _patterns(value)


def _all_patterns() -> list[str]:
    found: set[str] = set()
    for module in MODULES:
        for value in vars(module).values():
            if isinstance(value, Mapping | list | tuple):
                found.update(_patterns(value))
    for decl in declarations():
        found.update(_patterns(decl.create_schema))
    for version in openapi.versions_documented():
        found.update(_patterns(openapi.document(version)))
    return sorted(found)


PATTERNS = _all_patterns()


def test_the_walk_found_the_patterns_of_the_issue() -> None:
    assert {r"^CUSTOM_[A-Z0-9_]+$", r"^[a-zA-Z0-9\-._~]+$", r"^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$",
            r"^[a-zA-Z0-9_\-\.:]*$"} <= set(PATTERNS)  # fmt: skip


def _whole(pattern: str) -> str | None:
    """``X`` of a pattern ``^X$`` (anchored at both ends only): ECMA-262 accepts a string
    by it exactly when ``re.fullmatch(X, string)`` does -- an independent reference."""
    body = pattern[1:-1]
    if pattern.startswith("^") and pattern.endswith("$") and ecma_source(body) == body:
        return body
    return None


def test_most_patterns_are_anchored_at_both_ends() -> None:
    assert sum(_whole(p) is not None for p in PATTERNS) >= len(PATTERNS) - 2


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=5, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_pattern_refuses_a_trailing_newline(pattern: str, data: st.DataObject) -> None:
    schema = {"type": "string", "pattern": pattern}
    value = data.draw(st.from_regex(ecma_source(pattern), fullmatch=True), label="valid")
    assert Validator(schema).is_valid(value) and accepts(value, schema)
    validate(value, schema, "value")
    whole = _whole(pattern)
    for bad in (value + "\n", value + "\n\n", value + "\r\n"):
        if whole is not None and re.fullmatch(whole, bad):
            continue  # the pattern's own characters take a newline ("[^@]+"): valid for ECMA too
        assert not Validator(schema).is_valid(bad), (pattern, bad)
        assert not accepts(bad, schema), (pattern, bad)
        with pytest.raises(HTTPProblem) as refused:
            validate(bad, schema, "value")
        assert refused.value.status == 400


def test_patterns_stay_ecma_in_the_published_document() -> None:
    # ECMA-262 has no \Z: what the OpenAPI document publishes keeps its "$"
    text = openapi.document_json(openapi.versions_documented()[-1]).decode()
    assert "\\\\Z" not in text
    assert "CUSTOM_[A-Z0-9_]+$" in text


@pytest.mark.parametrize(
    ("pattern", "source"),
    [
        pytest.param("^a$", r"^a\Z", id="end"),
        pytest.param(r"^a\$$", r"^a\$\Z", id="escaped-dollar"),
        pytest.param("^[$]$", r"^[\$]\Z", id="dollar-in-class"),
        pytest.param("^[]$]$", r"^[]\$]\Z", id="bracket-first-in-class"),
        pytest.param("^[^]$]$", r"^[^]\$]\Z", id="negated-bracket-first"),
        pytest.param(r"^(a|b$)c", r"^(a|b\Z)c", id="inside-a-group"),
        pytest.param(r"^\\$", r"^\\\Z", id="escaped-backslash"),
        pytest.param("abc", "abc", id="no-anchor"),
    ],
)
def test_ecma_source_rewrites_dollar_assertions_escapes_literal_dollars(pattern: str, source: str) -> None:
    assert ecma_source(pattern) == source


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        pytest.param("^[$]$", "$", "$\n", id="dollar-in-class"),
        pytest.param(r"^a\$$", "a$", "a$\n", id="escaped-dollar"),
        pytest.param(r"^\\$", "\\", "\\\n", id="escaped-backslash"),
        pytest.param("^[]$]$", "]", "]\n", id="bracket-first-in-class"),
    ],
)
def test_the_verdict_reads_every_dollar_as_ecma_does(pattern: str, good: str, bad: str) -> None:
    # fastjsonschema rewrites "$" itself, naively (inside a class too): it gets no bare "$"
    schema = {"type": "string", "pattern": pattern}
    assert accepts(good, schema) and Validator(schema).is_valid(good)
    assert not accepts(bad, schema) and not Validator(schema).is_valid(bad)


@given(st.text(max_size=8))
def test_ecma_end_matches_only_at_the_end(text: str) -> None:
    assert (ecma_regex("^[a-z]*$").search(text) is not None) == (re.fullmatch("[a-z]*", text) is not None)


def _compiled_regexes() -> Iterator[tuple[str, re.Pattern[str]]]:
    for module in MODULES:
        for name, value in vars(module).items():
            if type(value).__name__ == "LocalProxy":
                continue  # flask.request and friends: nothing outside a request
            owner = getattr(value, "__self__", None)  # re.compile(...).fullmatch kept as a function
            for candidate in (value, owner):
                if isinstance(candidate, re.Pattern) and isinstance(candidate.pattern, str):
                    yield f"{module.__name__}.{name}", candidate


def test_no_regex_in_the_service_relies_on_pythons_dollar() -> None:
    # a "$" in a Python regex also accepts a trailing newline: \Z, fullmatch or ecma_regex instead
    offenders = [name for name, regex in _compiled_regexes()
                 if ecma_source(regex.pattern).count(r"\Z") != regex.pattern.count(r"\Z")]  # fmt: skip
    assert offenders == []


def _is_schema(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("type"), str | list)


def _schemas() -> list[tuple[str, Mapping[str, Any]]]:
    """Every request schema the service holds: module constants (the OpenAPI document's own
    fragments, which refer to its components, aside) and each declaration's create schema."""
    found = [
        (f"{module.__name__}.{name}", value)
        for module in MODULES
        if not module.__name__.startswith(openapi.__name__)
        for name, value in vars(module).items()
        if name.isupper() and _is_schema(value)
    ]
    found += [(f"declaration {d.kind}", d.create_schema) for d in declarations() if d.create_schema]
    return found


def test_every_schema_the_service_holds_compiles_for_the_verdict() -> None:
    # fastjsonschema judges every body: it must take each schema (and the walk must find them)
    found = _schemas()
    assert len(found) >= 20
    for name, schema in found:
        accepts({}, schema)  # compiles on first use; raises if fastjsonschema cannot take it
        assert name
