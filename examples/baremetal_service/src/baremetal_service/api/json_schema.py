"""The service's JSON Schema dialect: Draft 2020-12 whose ``pattern`` means what ECMA-262 means.

JSON Schema's ``pattern`` is an ECMA-262 regular expression.  The schemas are written
(and published in the OpenAPI document) in that dialect: ``^CUSTOM_[A-Z0-9_]+$``.  Python's
``re`` reads one thing differently, and it matters for every anchored pattern: ``$``
also matches *before a trailing newline*, so ``re.search("^CUSTOM_[A-Z0-9_]+$",
"CUSTOM_X\\n")`` matches.  jsonschema hands the pattern to ``re`` as it is, so a name, a MAC
or a resource class with a trailing newline passed every schema and was stored (and
then broke the ``Location`` header it went into).

:func:`ecma_regex` compiles a pattern with ECMA-262's ``$``: every ``$`` that is an
assertion (not escaped, not inside a character class) becomes ``\\Z``, the end of the
string and nothing else.  :data:`Validator` is jsonschema's Draft 2020-12 validator with
that ``pattern`` keyword; the compiled checks (:mod:`.fast_schema`) use the same
:func:`ecma_regex`, so both give the same verdict.  Everything else about the
patterns is Python's (``\\w`` and ``\\d`` are Unicode-aware, as in jsonschema).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

__all__ = ["Validator", "ecma_regex", "ecma_source"]


def ecma_source(pattern: str) -> str:
    """*pattern* with each ``$`` assertion written ``\\Z`` (ECMA-262's end of input)."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":  # an escape: itself and the next character, as they are
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            # a "]" first in the class (after "[" or "[^") is a literal one in Python's re
            start = i + 2 if pattern[i + 1 : i + 2] == "^" else i + 1
            if pattern[start : start + 1] == "]":
                out.append(pattern[i : start + 1])
                i = start + 1
                continue
        elif char == "$":
            char = r"\Z"
        out.append(char)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def ecma_regex(pattern: str) -> re.Pattern[str]:
    """*pattern* compiled with ECMA-262's ``$`` (:func:`ecma_source`); use ``.search`` like jsonschema."""
    return re.compile(ecma_source(pattern))


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


#: Draft 2020-12 with the ``pattern`` keyword above (jsonschema's own wording of the error).
Validator: Any = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _pattern})
