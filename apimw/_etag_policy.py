"""The etag middleware's route policies, sans-IO: which writes must carry If-Match, which the app enforces.

A policy is a list of entries ``METHOD`` or ``METHOD /path/prefix`` (``*`` for every etag
method), the same in code, a paste ini and oslo.config.  Two options use it:
``require_if_match`` (a write there without If-Match gets 428) and ``enforces`` (the app
makes the write conditional there and marks it).  Plain values in, plain values out, so
any middleware (WSGI today, ASGI tomorrow) decides alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from apimw.errors import ConfigError, HTTPProblem

#: One policy entry: ``(METHOD or "*", path prefix or "")``.
Rule = tuple[str, str]

#: Methods whose ``If-Match: *`` holds without the app: on a missing resource a PATCH,
#: DELETE or POST answers 404 and changes nothing, which is what a false ``*`` asks for
#: (RFC 9110 §13.1.1: "the condition is false if the origin server has no current
#: representation").  A PUT may *create*, so its ``*`` needs the app's own check.
_STAR_HOLDS_WITHOUT_APP: Final = frozenset({"PATCH", "DELETE", "POST"})


def parse_policy(entries: Iterable[str], methods: frozenset[str], *, option: str) -> tuple[Rule, ...]:
    """``["PATCH /v1/nodes", "DELETE"]`` -> ``(("PATCH", "/v1/nodes"), ("DELETE", ""))``, checked."""
    rules = []
    for entry in entries:
        method, _, prefix = entry.strip().partition(" ")
        method = method.upper()
        prefix = prefix.strip()
        if method != "*" and method not in methods:
            raise ConfigError(
                f"{option}: {method!r} is not one of the etag methods ({', '.join(sorted(methods))})"
            )
        if prefix and not prefix.startswith("/"):
            raise ConfigError(f"{option}: path prefix must start with '/', got {prefix!r}")
        rules.append((method, prefix))
    return tuple(rules)


def _under(path: str, prefix: str) -> bool:
    return not prefix or path == prefix or path.startswith(prefix.rstrip("/") + "/")


def route_matches(rules: tuple[Rule, ...], method: str, path: str) -> bool:
    """Whether a *method* request to *path* falls under one of *rules* (prefixes end at a ``/``)."""
    for rule_method, prefix in rules:
        if (rule_method == "*" or rule_method == method) and _under(path, prefix):
            return True
    return False


def uncovered(required: tuple[Rule, ...], enforced: tuple[Rule, ...], methods: frozenset[str]) -> list[str]:
    """The ``required`` entries that ``enforced`` does not cover, as written (``"PATCH /v1/nodes"``).

    A required route the app does not enforce is a trap: without If-Match it gets 428, with
    If-Match it is refused, so no client can write there.
    """
    missing = []
    for method, prefix in required:
        for one in sorted(methods) if method == "*" else (method,):
            if not any((m == "*" or m == one) and _under(prefix or "/", p) for m, p in enforced):
                missing.append(f"{method} {prefix}".strip())
                break
    return missing


def star_holds_without_app(method: str) -> bool:
    """``If-Match: *`` on *method* is met by the app's own 404 for a missing resource."""
    return method in _STAR_HOLDS_WITHOUT_APP


def precondition_unsupported(method: str, header: str = "If-Match") -> HTTPProblem:
    """400: a precondition (*header*) on a write this service cannot make conditional,
    decided before the app runs (``etag.if-match-unsupported``, ``etag.if-none-match-unsupported``,
    ``etag.if-unmodified-since-unsupported``)."""
    return HTTPProblem(
        400,
        f"etag.{header.lower()}-unsupported",
        f"This service cannot make a {method} on this resource conditional on {header}, so it "
        f"does not accept {header} here; nothing was changed. Resend the request without {header} "
        "to write unconditionally.",
    )
