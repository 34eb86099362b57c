"""Request-body schemas compiled once into plain Python checks (the accept decision only).

jsonschema's validator walks a schema per call (``descend``/``evolve``/``is_type`` per
keyword and property): about 1.5 ms for a patched node's 40 properties under a
profiler.  :func:`compile_schema` turns a schema into nested closures that give the
same yes/no with a few ``isinstance`` checks and comparisons per property.

Only what the service's schemas use is compiled, with Draft 2020-12's meaning (as
:data:`.json_schema.Validator` without a format checker gives it): ``type`` (one
or a list), ``properties``, ``required``, ``additionalProperties`` (a boolean),
``items`` (one schema), ``enum`` (of strings), ``maxLength``, ``minLength``,
``pattern`` (``re.search`` with ECMA-262's ``$``: :func:`.json_schema.ecma_regex`),
``minimum``, and the annotations ``format``, ``title``, ``description``.  Any other
keyword makes :func:`compile_schema` return ``None``: jsonschema then decides that schema
alone.

The caller (:func:`baremetal_service.api.common.validate`) accepts a body the compiled
check accepts; for any other it runs jsonschema, whose first error words the 400 as
before (and whose verdict stands should the two ever disagree).  A property test
(tests/example/api/test_fast_schema.py) checks both agree on generated documents;
``BAREMETAL_FAST_VALIDATION=false`` lets jsonschema decide every body.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any, Final

from .json_schema import ecma_regex

__all__ = ["Check", "compile_schema"]

Check = Callable[[Any], bool]

#: Keywords that only annotate (``format`` is not asserted without a format checker).
_ANNOTATIONS: Final = frozenset({"format", "title", "description", "$comment", "examples", "default"})
_KNOWN: Final = _ANNOTATIONS | {
    "type", "properties", "required", "additionalProperties", "items", "enum", "maxLength",
    "minLength", "pattern", "minimum",
}  # fmt: skip


class _Unsupported(Exception):  # noqa: N818 - internal signal: leave this schema to jsonschema
    pass


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Number)


_TYPES: Final[dict[str, Check]] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": _is_integer,
    "number": _is_number,
}


#: Types that are one class exactly (an ``isinstance`` against a tuple of them).
_CLASSES: Final[dict[str, type]] = {"string": str, "object": dict, "array": list}


def compile_schema(schema: Mapping[str, Any]) -> Check | None:
    """A function ``document -> bool`` that says whether *schema* accepts it; ``None`` when
    *schema* uses a keyword this compiler does not know."""
    try:
        return _compile(schema)
    except _Unsupported:
        return None


def _type_check(types: Any) -> Check:
    names = [types] if isinstance(types, str) else list(types)
    if not names or any(not isinstance(n, str) or n not in _TYPES for n in names):
        raise _Unsupported
    plain = tuple(_CLASSES[n] for n in names if n in _CLASSES)
    others = tuple(_TYPES[n] for n in names if n not in _CLASSES and n != "null")
    nullable = "null" in names
    if not others:
        if nullable:
            return lambda v: v is None or isinstance(v, plain)
        return lambda v: isinstance(v, plain)

    def check(value: Any) -> bool:
        if (nullable and value is None) or (plain and isinstance(value, plain)):
            return True
        return any(test(value) for test in others)

    return check


def _compile(schema: Any) -> Check:
    if schema is True or schema == {}:
        return lambda v: True
    if not isinstance(schema, Mapping) or not set(schema) <= _KNOWN:
        raise _Unsupported
    checks: list[Check] = []
    if "type" in schema:
        checks.append(_type_check(schema["type"]))
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise _Unsupported  # jsonschema's equality of numbers, booleans, containers: not compiled
        allowed = frozenset(values)
        checks.append(lambda v: isinstance(v, str) and v in allowed)
    string_checks = _string_checks(schema)
    if string_checks:
        checks.append(lambda v: not isinstance(v, str) or all(c(v) for c in string_checks))
    if "minimum" in schema:
        minimum = schema["minimum"]
        if not _is_number(minimum):
            raise _Unsupported
        checks.append(lambda v: not _is_number(v) or not v < minimum)
    if "items" in schema:
        item = _compile(schema["items"])
        checks.append(lambda v: not isinstance(v, list) or all(item(x) for x in v))
    if {"properties", "required", "additionalProperties"} & set(schema):
        checks.append(_object_check(schema))
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    first, *rest = checks
    return lambda v: first(v) and all(c(v) for c in rest)


def _string_checks(schema: Mapping[str, Any]) -> list[Check]:
    out: list[Check] = []
    if "maxLength" in schema:
        longest = schema["maxLength"]
        if not _is_integer(longest):
            raise _Unsupported
        out.append(lambda v: len(v) <= longest)
    if "minLength" in schema:
        shortest = schema["minLength"]
        if not _is_integer(shortest):
            raise _Unsupported
        out.append(lambda v: len(v) >= shortest)
    if "pattern" in schema:
        if not isinstance(schema["pattern"], str):
            raise _Unsupported
        search = ecma_regex(schema["pattern"]).search
        out.append(lambda v: search(v) is not None)
    return out


def _object_check(schema: Mapping[str, Any]) -> Check:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise _Unsupported
    if not isinstance(additional, bool) or not all(isinstance(r, str) for r in required):
        raise _Unsupported  # a schema for the additional properties: not compiled
    compiled = {name: _compile(sub) for name, sub in properties.items()}
    needed = tuple(required)

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        for name in needed:
            if name not in value:
                return False
        get = compiled.get
        for key, item in value.items():
            test = get(key)
            if test is None:
                if not additional:
                    return False
            elif not test(item):
                return False
        return True

    return check
