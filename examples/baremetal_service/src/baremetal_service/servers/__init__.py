"""The HTTP servers the service runs behind, and what they share.

waitress (the default, :mod:`baremetal_service.cli`), granian (:mod:`.granian`, opt-in with
``--server granian``) and gunicorn (:mod:`.gunicorn_conf`, the production recipe) each hold
at most so many client connections; each connection costs a file descriptor, so the
process's descriptor limit is raised to fit them first (:func:`connection_limit_that_fits`).
"""

from __future__ import annotations

import socket
import sys
from typing import Final

if sys.platform != "win32":  # (Unix only; elsewhere the descriptor limit is left alone)
    import resource

__all__ = ["RESERVED_DESCRIPTORS", "check_listen", "connection_limit_that_fits", "fit_connection_limit"]

#: Descriptors kept for everything but client connections: the database pool and its
#: overflow, store connections, BMC sessions, log files, the server's own sockets.
RESERVED_DESCRIPTORS: Final = 256


def fit_connection_limit(wanted: int) -> tuple[int, int | None]:
    """Raise this process's descriptor soft limit towards *wanted* connections; return what fits.

    Returns ``(connection limit, soft limit)``: the soft limit goes up (never beyond the
    hard one) to leave :data:`RESERVED_DESCRIPTORS` besides the client connections, and
    the connection limit comes down when the hard limit is too low for that.  Not on Unix
    (no ``resource`` module): *wanted* as it is and ``None``.
    """
    if sys.platform == "win32":  # pragma: no cover - not Unix
        return wanted, None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        if target > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
            except (ValueError, OSError):  # a container may refuse it: keep the soft limit
                pass
    if soft == resource.RLIM_INFINITY:
        return wanted, None
    return max(1, min(wanted, soft - RESERVED_DESCRIPTORS)), soft


def connection_limit_that_fits(wanted: int) -> int:
    """:func:`fit_connection_limit`, saying once at start when the limit came down."""
    connection_limit, soft = fit_connection_limit(wanted)
    if connection_limit < wanted:
        print(  # noqa: T201
            f"baremetal-service: the descriptor limit (ulimit -n) is {soft}: at most {connection_limit} "
            f"connections instead of {wanted}",
            file=sys.stderr,
            flush=True,
        )
    return connection_limit


def check_listen(host: str, port: int) -> None:
    """Raise ``OSError`` when *host*:*port* cannot be listened on (as the server would fail)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1)
