"""``baremetal-service``: run the bare-metal API (and its conductor worker) on one port.

    baremetal-service [--host 127.0.0.1] [--port 6385] [--database URL] [--store URL]
                      [--auth-strategy noauth|http_basic --htpasswd FILE]
    baremetal-service openapi [--version 1.52|latest] [--output FILE]

``--database`` is a SQLAlchemy URL (default: a SQLite file ``baremetal.sqlite``
in the current directory; ``postgresql+psycopg://...`` for PostgreSQL).
``--store`` is the idempotency replay store: ``memory://`` (default),
``redis://host:port/db`` or ``memcached://host:port``.  ``--paste FILE`` builds
the pipeline from an ``api-paste.ini`` instead of in code.

The server is waitress (``--server waitress``, the default: it reads each request
whole before a thread sees it, so slow clients cost no thread) or granian
(``--server granian``, faster; see granian_server.py).  waitress polls with ``poll()``
(``select()`` cannot watch a descriptor above 1023).  Both hold at most
``--connection-limit`` client connections (lowered to fit the descriptor limit, whose
soft value is raised towards the hard one at start) and close idle connections after
``--idle-timeout`` seconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import gc_tuning
from . import settings as defaults

DEFAULT_HOST = defaults.HOST
DEFAULT_PORT = defaults.PORT
DEFAULT_DATABASE = defaults.DATABASE
DEFAULT_STORE = defaults.STORE
DEFAULT_CONNECTION_LIMIT = defaults.CONNECTION_LIMIT
DEFAULT_IDLE_TIMEOUT = defaults.IDLE_TIMEOUT
SERVERS = ("granian", "waitress")
#: Descriptors kept for everything but client connections: the database pool and its
#: overflow, store connections, BMC sessions, log files, the server's own sockets.
RESERVED_DESCRIPTORS = 256


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="baremetal-service",
        description="An Ironic-compatible bare-metal provisioning API behind the apimw middlewares.",
        epilog="other command:\n  baremetal-service openapi [--version X] [--output FILE]\n"
        "                        write the OpenAPI document (no server, no database; see its --help)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--database",
        default=None,
        help="SQLAlchemy database URL (default: BAREMETAL_DATABASE, else a SQLite file in the current "
        "directory; with --paste, else the file's [DEFAULT] database)",
    )
    parser.add_argument(
        "--store",
        default=None,
        help="idempotency replay store URL: memory://, redis://..., memcached://... (default: "
        "BAREMETAL_STORE, else memory://; with --paste, else the file's [DEFAULT] store)",
    )
    parser.add_argument("--paste", default=None, help="build the pipeline from this api-paste.ini")
    parser.add_argument(
        "--auth-strategy",
        choices=("noauth", "http_basic"),
        default=os.environ.get("BAREMETAL_AUTH_STRATEGY", defaults.AUTH_STRATEGY),
        help="noauth (trusts X-Project-Id; default) or http_basic (htpasswd file with bcrypt entries)",
    )
    parser.add_argument(
        "--htpasswd",
        default=os.environ.get("BAREMETAL_HTPASSWD", defaults.HTPASSWD),
        help="the http_basic user file (default /etc/baremetal/htpasswd)",
    )
    parser.add_argument(
        "--server",
        choices=SERVERS,
        default=os.environ.get("BAREMETAL_SERVER", defaults.SERVER),
        help=f"HTTP server: waitress (slow clients cost no thread) or granian (Rust, the faster one) "
        f"(default {defaults.SERVER}; docs/baremetal-service.md, Server, has the measurements)",
    )
    parser.add_argument(
        "--threads", type=int, default=defaults.THREADS, help=f"worker threads (default {defaults.THREADS})"
    )
    parser.add_argument(
        "--workers", type=int, default=1,
        help="granian: worker processes (default 1); more than one needs a shared --store (redis://, "
        "memcached://) and shares one etag key (--etag-key-file, BAREMETAL_ETAG_KEY, else one made at start)",
    )
    parser.add_argument(
        "--connection-limit",
        type=int,
        default=DEFAULT_CONNECTION_LIMIT,
        help="most client connections open at once (per process); more wait to be accepted (default "
        f"{DEFAULT_CONNECTION_LIMIT}, lowered to fit the descriptor limit, ulimit -n)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=int,
        default=DEFAULT_IDLE_TIMEOUT,
        help="seconds a client connection may stay silent (no request, nothing sent or read) "
        f"before it is closed (default {DEFAULT_IDLE_TIMEOUT})",
    )
    parser.add_argument("--no-conductor", action="store_true", help="do not run the conductor worker")
    parser.add_argument(
        "--enabled-hardware-types",
        default=",".join(defaults.HARDWARE_TYPES),
        help="comma-separated hardware types to enable (fake-hardware, redfish; default fake-hardware)",
    )
    parser.add_argument(
        "--etag-key-file",
        default=None,
        help="file holding the etag HMAC key shared by every process on this database "
        "(default: $BAREMETAL_ETAG_KEY, else a random key per process)",
    )
    parser.add_argument(
        "--power-sync-interval",
        type=float,
        default=defaults.POWER_SYNC_INTERVAL,
        help="seconds between power-state syncs with the BMCs; 0 turns the sync off (default 60)",
    )
    parser.add_argument(
        "--request-id", choices=("builtin", "oslo"), default=defaults.REQUEST_ID,
        help="the x-openstack-request-id middleware: ours without webob (default) or oslo.middleware's",
    )
    parser.add_argument(
        "--gc", choices=gc_tuning.MODES, default=os.environ.get("BAREMETAL_GC", gc_tuning.DEFAULT_MODE),
        help="garbage collector once the application is built: tuned (freeze the start-up objects, "
        "fewer young-generation passes; default) or default (the interpreter's settings)",
    )
    parser.add_argument(
        "--public-endpoint", default=os.environ.get("BAREMETAL_PUBLIC_ENDPOINT"),
        help="base URL of links and Location headers, e.g. https://baremetal.example.com:6385 "
        "(default: $BAREMETAL_PUBLIC_ENDPOINT, else the request's Host header)",
    )
    parser.add_argument("--debug", action="store_true", help="log at DEBUG level")
    args = parser.parse_args(argv)
    if args.server not in SERVERS:  # argparse checks the choices of an option, not of its default
        parser.error(f"BAREMETAL_SERVER must be one of {', '.join(SERVERS)}, got {args.server!r}")
    if not 0 < args.port < 65536:
        parser.error(f"--port must be between 1 and 65535, got {args.port}")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.workers > 1 and args.server != "granian":
        parser.error("--workers is granian's (add --server granian): waitress serves from one process")
    if args.connection_limit < 1:
        parser.error("--connection-limit must be at least 1")
    if args.idle_timeout < 1:
        parser.error("--idle-timeout must be at least 1 second")
    if args.power_sync_interval < 0:
        parser.error("--power-sync-interval must be 0 (off) or a positive number of seconds")
    # What the command line or the environment names; with --paste, the file decides the rest.
    args.configured = {
        "database_url": args.database or os.environ.get("BAREMETAL_DATABASE") or None,
        "store_url": args.store or os.environ.get("BAREMETAL_STORE") or None,
    }
    args.database = args.configured["database_url"] or DEFAULT_DATABASE
    args.store = args.configured["store_url"] or DEFAULT_STORE
    return args


def read_etag_key(path: str | None, environ: Mapping[str, str]) -> bytes | None:
    """The etag key from *path* (whitespace stripped), else ``BAREMETAL_ETAG_KEY``, else None.

    A key on the command line would show in ``ps``: only a file or the environment.
    """
    if path:
        key = Path(path).read_bytes().strip()
        if not key:
            raise ValueError(f"--etag-key-file {path} is empty")
        return key
    value = environ.get("BAREMETAL_ETAG_KEY")
    return value.encode("utf-8") if value else None


def build(args: argparse.Namespace) -> Any:
    from baremetal_service.app import build_app, load_paste_app
    from baremetal_service.settings import public_endpoint
    from baremetal_service.wsgi import settings

    # every BAREMETAL_* variable checked, whatever the auth strategy (main() checks the store
    # against the command line's --workers, not against a WEB_CONCURRENCY meant for gunicorn)
    conf = settings(os.environ, check_processes=False)
    endpoint = public_endpoint(args.public_endpoint)
    etag_key = read_etag_key(args.etag_key_file, os.environ)
    if args.paste:
        return load_paste_app(
            args.paste, **args.configured, run_conductor=not args.no_conductor,
            etag_key=etag_key, public_endpoint=endpoint,
        )  # fmt: skip
    if args.auth_strategy != "noauth":  # the production stack of wsgi.py (auth, /healthcheck)
        from baremetal_service.wsgi import make_application

        return make_application({
            **os.environ, "BAREMETAL_DATABASE": args.database, "BAREMETAL_STORE": args.store,
            "BAREMETAL_AUTH_STRATEGY": args.auth_strategy, "BAREMETAL_HTPASSWD": args.htpasswd,
            "BAREMETAL_CONDUCTOR_WORKERS": "0" if args.no_conductor else "1",
            "BAREMETAL_PUBLIC_ENDPOINT": endpoint or "",
            **({"BAREMETAL_ETAG_KEY": etag_key.decode("utf-8")} if etag_key else {}),
        })  # fmt: skip
    return build_app(  # serves /healthcheck too
        etag_key=etag_key,
        database_url=args.database,
        store_url=args.store,
        run_conductor=not args.no_conductor,
        enabled_hardware_types=[t.strip() for t in args.enabled_hardware_types.split(",") if t.strip()],
        power_sync_interval=args.power_sync_interval,
        request_id=args.request_id,
        fast_validation=conf["fast_validation"], fast_reads=conf["fast_reads"],
        fast_writes=conf["fast_writes"], lease=conf["idempotency_lease"], public_endpoint=endpoint,
    )  # fmt: skip


def fit_connection_limit(wanted: int) -> tuple[int, int | None]:
    """Raise this process's descriptor soft limit towards *wanted* connections; return what fits.

    Returns ``(connection limit, soft limit)``: the soft limit goes up (never beyond the
    hard one) to leave :data:`RESERVED_DESCRIPTORS` besides the client connections, and
    the connection limit comes down when the hard limit is too low for that.  Without
    the ``resource`` module (not Unix), *wanted* as it is and ``None``.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not Unix
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


#: Connections waitress accepts in one turn of its loop when they queue up.  It accepts one a
#: turn, and each turn walks every open connection: 5,000 arriving at once took it about 6 s,
#: during which new clients waited.
ACCEPT_BATCH = 64


def _accept_in_batches(listener: Any, socket_map: Mapping[int, Any]) -> None:
    """Make *listener* accept up to :data:`ACCEPT_BATCH` queued connections per turn (while under
    its connection limit: ``readable()`` is waitress's own check)."""
    accept_one = listener.handle_accept

    def handle_accept() -> None:
        for _ in range(ACCEPT_BATCH):
            before = len(socket_map)
            accept_one()
            if len(socket_map) == before or not listener.readable():
                return

    listener.handle_accept = handle_accept


#: The largest body waitress reads before handing a request to the application (whose own
#: limit, api.common.MAX_BODY_BYTES, is 1 MiB).
SERVER_BODY_LIMIT = 4 * 1024 * 1024


def _keep_alive_channel() -> type:
    """waitress's connection class, keeping the connection open after a 1xx, 204 or 304.

    waitress 3 closes every HTTP/1.1 response that has no ``Content-Length`` (it cannot
    tell where a body ends), including those that have no body at all and must not
    carry one (RFC 9110 8.6): each DELETE's 204 came with ``Connection: close`` and
    cost the client its keep-alive connection.  Such a response ends at its blank
    line, so nothing is needed to frame it; a client asking to close still gets its
    close, and so does everything else waitress closes for.
    """
    from waitress.channel import HTTPChannel
    from waitress.task import WSGITask

    class BodilessKeepAliveTask(WSGITask):
        _ends_at_headers = False

        def build_response_header(self) -> bytes:
            self._ends_at_headers = (
                self.version == "1.1"
                and not self.has_body
                and not self.close_on_finish
                and self.request.headers.get("CONNECTION", "").lower() != "close"
            )
            try:
                return super().build_response_header()
            finally:
                self._ends_at_headers = False

        def set_close_on_finish(self) -> None:
            if self._ends_at_headers:  # the only close left in build_response_header: "no length"
                return
            super().set_close_on_finish()

    class KeepAliveChannel(HTTPChannel):
        task_class = BodilessKeepAliveTask

    return KeepAliveChannel


def create_server(app: Any, args: argparse.Namespace) -> Any:
    """The waitress server for *app*, listening (``OSError`` when the address cannot be bound)."""
    import socket

    from waitress.server import BaseWSGIServer
    from waitress.server import create_server as waitress_server

    # waitress turns a name that does not resolve into "Invalid host/port specified.": say why
    socket.getaddrinfo(args.host, args.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)

    connection_limit = connection_limit_that_fits(args.connection_limit)
    socket_map: dict[int, Any] = {}
    server = waitress_server(
        app,
        map=socket_map,
        host=args.host,
        port=args.port,
        threads=args.threads,
        ident="baremetal_service",
        clear_untrusted_proxy_headers=True,
        # poll(), not select(): select() raises "filedescriptor out of range" (and the
        # server loop dies) as soon as one descriptor is above 1023.
        asyncore_use_poll=True,
        connection_limit=connection_limit,
        # An idle connection is closed after channel_timeout, found by a sweep every
        # cleanup_interval: a client waiting behind idle ones waits at most about both.
        channel_timeout=args.idle_timeout,
        cleanup_interval=max(1, min(30, args.idle_timeout // 2)),
        # waitress reads (and spools) a whole body before the application sees it: refuse a
        # body far over the application's limit at once (plain-text 413 from waitress); one
        # just over it still reaches the application, which answers a JSON 413.
        max_request_body_size=SERVER_BODY_LIMIT,
    )
    channel = _keep_alive_channel()
    for listener in list(socket_map.values()):  # one per address the host resolves to
        if isinstance(listener, BaseWSGIServer):
            listener.channel_class = channel
            _accept_in_batches(listener, socket_map)
    return server


def serve(server: Any, host: str) -> None:
    def _stop(signum: int, frame: Any) -> None:
        # Only leave the loop: server.run() then waits for the worker threads.  Closing the
        # server here closed its wake-up pipe under the threads still answering requests
        # ("OSError: [Errno 9] Bad file descriptor" tracebacks on every busy shutdown).
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _stop)
    _announce(f"http://{host}:{server.effective_port}")
    try:
        server.run()  # returns on SystemExit/KeyboardInterrupt once the worker threads are done
    finally:
        server.close()


def openapi_command(argv: Sequence[str]) -> int:
    """``baremetal-service openapi [--version X] [--output FILE]``: write the OpenAPI document."""
    from baremetal_service import openapi

    parser = argparse.ArgumentParser(
        prog="baremetal-service openapi",
        description="Write the OpenAPI 3.1 document of the API at one microversion (no server, no database).",
    )
    parser.add_argument(
        "--version", default="latest", help="MAJOR.MINOR or 'latest' (default latest, the maximum)"
    )
    parser.add_argument("--output", default="-", help="file to write (default: standard output)")
    args = parser.parse_args(argv)
    try:
        version = openapi.parse_version(args.version)
    except ValueError as exc:
        parser.error(str(exc))
    text = json.dumps(openapi.document(version), indent=2) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


def _cannot_listen(args: argparse.Namespace, exc: Exception) -> int:
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
    print(  # noqa: T201
        f"baremetal-service: cannot start: cannot listen on {args.host}:{args.port}: {reason}",
        file=sys.stderr,
    )
    return 2


def _announce(url: str) -> None:
    print(f"baremetal-service: serving on {url}", flush=True)  # noqa: T201


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["openapi"]:
        return openapi_command(arguments[1:])
    args = parse_args(arguments)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    try:
        from baremetal_service.wsgi import check_built_store, check_store_processes

        if not args.paste:  # a paste file's own store is judged once built, below
            check_store_processes(args.store, args.workers)  # memory:// is one process's
        app = build(args)
        try:
            check_built_store(app, args.workers)  # the store the pipeline holds (a paste file's own)
        except Exception:
            app.close()
            raise
    except Exception as exc:  # configuration problems: one clear line, exit 2
        print(f"baremetal-service: cannot start: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    if args.server == "granian":
        from baremetal_service import granian_server

        # built here to report a configuration error as one line; the worker builds its own
        close = getattr(app, "close", None)
        if close is not None:
            close()
        try:
            granian_server.check_listen(args.host, args.port)
        except (OSError, ValueError) as exc:
            return _cannot_listen(args, exc)
        connection_limit = connection_limit_that_fits(args.connection_limit)
        return granian_server.serve(args, arguments, _announce, connection_limit=connection_limit)
    gc_tuning.apply(args.gc)
    try:
        try:
            server = create_server(app, args)
        except (OSError, ValueError) as exc:  # port in use, address not on this machine, unknown name
            return _cannot_listen(args, exc)
        serve(server, args.host)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        close = getattr(app, "close", None)
        if close is not None:
            close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
