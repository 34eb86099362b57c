"""WSGI plumbing the middlewares share: ``start_response`` towards the app, ``close()`` once.

PEP 3333 lets an app call ``start_response`` again, with ``exc_info``, to replace the
headers it gave (the server re-raises ``exc_info`` if they were sent).  A middleware that
hands the app its own ``start_response`` (to add headers) wraps the server's in a
:class:`StartResponse`; a middleware that renders an error the app raised asks it
:meth:`~StartResponse.exc_info` (``None`` while nothing was started: then the error page is an
answer, not a replacement).  :class:`ClosingIterable` is an answer's iterable whose
``close()`` closes the app's result exactly once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import OptExcInfo
    from _typeshed.wsgi import StartResponse as ServerStartResponse

__all__ = ["ClosingIterable", "StartResponse", "close"]

Headers = list[tuple[str, str]]


class StartResponse:
    """The ``start_response`` a middleware hands its app: calls the server's *start_response*
    with the app's headers as *edit* makes them (as they are without *edit*).

    The first call goes without ``exc_info``: there is nothing to replace, so an error the
    app handled by itself is its answer (with ``exc_info``, webob's ``get_response`` and
    werkzeug's test client re-raise it).  A later call passes ``exc_info`` on, as PEP 3333
    says: the server replaces the headers, or re-raises when they were sent.
    """

    __slots__ = ("edit", "server", "started")

    def __init__(
        self, start_response: ServerStartResponse, edit: Callable[[Headers], Headers] | None = None
    ) -> None:
        self.server = start_response
        self.edit = edit
        #: the app called it (its answer has started)
        self.started = False

    def __call__(
        self, status: str, headers: Headers, exc_info: OptExcInfo | None = None
    ) -> Callable[[bytes], object]:
        if self.edit is not None:
            headers = self.edit(headers)
        if self.started:
            return self.server(status, headers, exc_info)
        self.started = True
        return self.server(status, headers)

    def exc_info(self) -> OptExcInfo | None:
        """What to pass with an error answer rendered while handling an exception the app
        raised: ``sys.exc_info()`` once the app's answer has started (it replaces it), else
        ``None``."""
        return sys.exc_info() if self.started else None


def close(result: Iterable[bytes] | None) -> None:
    """Call *result*'s ``close()`` if it has one (PEP 3333)."""
    close_result = getattr(result, "close", None)
    if close_result is not None:
        close_result()


class ClosingIterable:
    """An answer's iterable: the chunks *head*, then those of *rest*; ``close()`` closes
    *source* (the app's result) exactly once, however often the server calls it."""

    __slots__ = ("_head", "_rest", "_source")

    def __init__(
        self, head: list[bytes], rest: Iterator[bytes] | None, source: Iterable[bytes] | None
    ) -> None:
        self._head = head
        self._rest = rest
        self._source = source

    def __iter__(self) -> Iterator[bytes]:
        head, self._head = self._head, []
        yield from head
        if self._rest is not None:
            yield from self._rest

    def close(self) -> None:
        source, self._source = self._source, None
        close(source)
