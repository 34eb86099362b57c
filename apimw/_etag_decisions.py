"""The etag rules' vocabulary, sans-IO: the request's :class:`Facts`, the named decisions
(:class:`Refuse`, :class:`NotModified`, :class:`Run` before the app; :class:`Send`,
:class:`ReadBody`, :class:`Refuse`, :class:`NotModified` on its answer) and HTTP-dates."""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from apimw._etag_conditions import IfMatch, IfNoneMatch
from apimw.errors import HTTPProblem


class Facts:
    """What the rules read of a request: its method (upper case), path below the script, the
    four precondition header values (``None`` when absent; repeated lines comma-joined) and the
    served microversion (``None`` when no microversion middleware left one)."""

    __slots__ = ("method", "path", "if_match", "if_none_match", "if_modified_since",
                 "if_unmodified_since", "served")  # fmt: skip

    def __init__(
        self,
        method: str,
        path: str,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
        if_modified_since: str | None = None,
        if_unmodified_since: str | None = None,
        served: object = None,
    ) -> None:
        self.method = method
        self.path = path
        self.if_match = if_match
        self.if_none_match = if_none_match
        self.if_modified_since = if_modified_since
        self.if_unmodified_since = if_unmodified_since
        self.served = served


class Refuse:
    """Answer now with :attr:`problem` (the app does not run, or its answer is replaced)."""

    __slots__ = ("problem",)

    def __init__(self, problem: HTTPProblem) -> None:
        self.problem = problem


class NotModified:
    """Answer 304 with :attr:`headers` (the ``ETag`` and the fields RFC 9110 §15.4.5 names)."""

    __slots__ = ("headers",)

    def __init__(self, headers: list[tuple[str, str]]) -> None:
        self.headers = headers


class Send:
    """Send the app's answer with :attr:`headers` (its own, or with the ``ETag`` added)."""

    __slots__ = ("headers",)

    def __init__(self, headers: list[tuple[str, str]]) -> None:
        self.headers = headers


class Run:
    """Call the app with :attr:`additions` set in the environ / scope, then treat its answer
    by :meth:`ETagRules.answer`.

    ``lookup``: ask ``current_etag`` first (:meth:`ETagRules.prechecked`).  ``watch``: the
    answer needs the rules (an etag to add, a condition to evaluate, an acknowledgement to
    check); without it the glue passes the answer through untouched.
    """

    __slots__ = ("additions", "if_match", "if_none_match", "if_modified_since",
                 "if_unmodified_since", "handed", "send_etag", "lookup", "watch", "evaluate",
                 "needs_etag")  # fmt: skip

    def __init__(
        self,
        additions: Mapping[str, Any],
        *,
        if_match: IfMatch | None = None,
        if_none_match: IfNoneMatch | None = None,
        if_modified_since: datetime | None = None,
        if_unmodified_since: datetime | None = None,
        handed: tuple[Any, ...] = (),
        send_etag: bool = False,
        lookup: bool = False,
    ) -> None:
        self.additions = additions
        #: evaluated on a GET/HEAD answer, pre-checked on a write (the app enforces it)
        self.if_match = if_match
        self.if_none_match = if_none_match
        self.if_modified_since = if_modified_since
        self.if_unmodified_since = if_unmodified_since
        #: the conditions handed to the app, which must acknowledge enforcing them
        self.handed = handed
        self.send_etag = send_etag
        self.lookup = lookup
        conditions = (
            if_match is not None or if_none_match is not None
            or if_modified_since is not None or if_unmodified_since is not None
        )  # fmt: skip
        self.watch = bool(send_etag or handed or conditions)
        #: a GET/HEAD's conditions, evaluated on the app's answer (a write's are the app's)
        self.evaluate = not handed and conditions
        #: the answer's etag is needed: to send it, or to compare it with a read's etag condition
        self.needs_etag = send_etag or (not handed and (if_match is not None or if_none_match is not None))


class ReadBody:
    """The etag is to be read from the JSON body: hold at most :attr:`limit` bytes of it, then
    finish the decision with :meth:`ETagRules.answer_body`, which reads :attr:`run` and the
    app's :attr:`headers` kept here (the answer's start is decided once)."""

    __slots__ = ("limit", "run", "headers")

    def __init__(self, limit: int, run: Run, headers: list[tuple[str, str]]) -> None:
        self.limit = limit
        self.run = run
        self.headers = headers


Decision = Refuse | NotModified | Run
Treatment = Send | Refuse | NotModified | ReadBody


# == HTTP-dates ==================================================================================


def parse_http_date(value: str | None) -> datetime | None:
    """An HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, or the obsolete RFC 850 and asctime forms)
    as an aware UTC datetime; ``None`` when absent or not one valid date (a list of dates is
    not)."""
    if value is None or len(value) > 64:
        return None
    text = value.strip()
    if text.count(",") > 1:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
