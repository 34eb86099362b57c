"""``baremetal-service``: run the bare-metal API (and its conductor worker) on one port.

    baremetal-service [--host 127.0.0.1] [--port 6385] [--database URL] [--store URL]
                      [--auth-strategy noauth|http_basic|keystone] [--htpasswd FILE]
                      [--config-file /etc/baremetal/baremetal.conf]
    baremetal-service openapi [--version 1.52|latest] [--output FILE]

``--database`` is a SQLAlchemy URL (default: a SQLite file ``baremetal.sqlite``
in the current directory; ``postgresql+psycopg://...`` for PostgreSQL).
``--store`` is the idempotency replay store: ``memory://`` (default),
``redis://host:port/db`` or ``memcached://host:port``.  ``--paste FILE`` builds
the pipeline from an ``api-paste.ini`` instead of in code.  ``--auth-strategy keystone``
validates Keystone tokens and applies Ironic's access rules, configured by the
``[keystone_authtoken]`` and ``[oslo_policy]`` sections of ``--config-file`` (as Ironic
reads its own; :mod:`baremetal_service.keystone`).

The server is waitress (``--server waitress``, the default: it reads each request
whole before a thread sees it, so slow clients cost no thread) or granian
(``--server granian``, faster; see servers/granian.py).  waitress polls with ``poll()``
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
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer
from waitress.server import create_server as waitress_server
from waitress.task import WSGITask

from apimw.errors import ConfigError

from . import deploy, openapi, versions
from . import settings as defaults
from .servers import check_listen, connection_limit_that_fits

DEFAULT_HOST = defaults.HOST
DEFAULT_PORT = defaults.PORT
DEFAULT_DATABASE = defaults.DATABASE
DEFAULT_STORE = defaults.STORE
DEFAULT_CONNECTION_LIMIT = defaults.CONNECTION_LIMIT
DEFAULT_IDLE_TIMEOUT = defaults.IDLE_TIMEOUT
SERVERS = ("granian", "waitress")


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
        choices=defaults.AUTH_STRATEGIES,
        default=os.environ.get("BAREMETAL_AUTH_STRATEGY", defaults.AUTH_STRATEGY),
        help="noauth (trusts X-Project-Id; default), http_basic (htpasswd file with bcrypt entries) or "
        "keystone (keystonemiddleware auth_token and Ironic's access rules; needs the keystone extra)",
    )
    parser.add_argument(
        "--config-file",
        action="append",
        default=None,
        help="keystone: an oslo.config file with [keystone_authtoken] and [oslo_policy] (repeatable; "
        "default: $BAREMETAL_CONFIG_FILE, else /etc/baremetal/baremetal.conf if it exists)",
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
        f"(default {defaults.SERVER}; docs/example/baremetal-service.md, Server, has the measurements)",
    )
    parser.add_argument(
        "--threads", type=int, default=defaults.THREADS, help=f"worker threads (default {defaults.THREADS})"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
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
        "--public-endpoint",
        default=os.environ.get("BAREMETAL_PUBLIC_ENDPOINT"),
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


def read_etag_key(path: str | None, environ: Mapping[str, str]) -> str | None:
    """The etag key from *path* (whitespace stripped), else ``BAREMETAL_ETAG_KEY``, else None.

    A key on the command line would show in ``ps``: only a file or the environment.
    """
    if path:
        try:
            key = Path(path).read_text(encoding="utf-8").strip()
        except UnicodeDecodeError:
            raise ConfigError(f"--etag-key-file {path} is not UTF-8 text") from None
        if not key:
            raise ConfigError(f"--etag-key-file {path} is empty")
        return key
    return environ.get("BAREMETAL_ETAG_KEY") or None


def configure(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the service is built from: the environment's (every ``BAREMETAL_*`` variable
    checked, whatever the mode), with the command line's options laid over them.

    :func:`main` checks the store against the command line's ``--workers``, not against a
    ``WEB_CONCURRENCY`` meant for gunicorn.
    """
    conf = defaults.from_environ(os.environ, check_processes=False)
    conf.update(
        database=args.configured["database_url"],
        store=args.configured["store_url"],
        paste_ini=args.paste,
        auth_strategy=args.auth_strategy,
        config_files=args.config_file or conf["config_files"],
        htpasswd=args.htpasswd,
        etag_key=read_etag_key(args.etag_key_file, os.environ),
        public_endpoint=defaults.public_endpoint(args.public_endpoint),
        conductor_workers=0 if args.no_conductor else conf["conductor_workers"],
        enabled_hardware_types=[t.strip() for t in args.enabled_hardware_types.split(",") if t.strip()],
        power_sync_interval=args.power_sync_interval,
        processes=args.workers,
    )
    return conf


def build(args: argparse.Namespace) -> deploy.ServiceApp:
    """The service the command line describes (:func:`baremetal_service.deploy.build`)."""
    return deploy.build(configure(args))


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


class BodilessKeepAliveTask(WSGITask):
    """waitress's request task, keeping the connection open after a 1xx, 204 or 304.

    waitress 3 closes every HTTP/1.1 response that has no ``Content-Length`` (it cannot
    tell where a body ends), including those that have no body at all and must not
    carry one (RFC 9110 8.6): each DELETE's 204 came with ``Connection: close`` and
    cost the client its keep-alive connection.  Such a response ends at its blank
    line, so nothing is needed to frame it; a client asking to close still gets its
    close, and so does everything else waitress closes for.
    """

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
    """waitress's connection class with :class:`BodilessKeepAliveTask`."""

    task_class = BodilessKeepAliveTask


def create_server(app: Any, args: argparse.Namespace) -> Any:
    """The waitress server for *app*, listening (``OSError`` when the address cannot be bound)."""
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
    for listener in list(socket_map.values()):  # one per address the host resolves to
        if isinstance(listener, BaseWSGIServer):
            listener.channel_class = KeepAliveChannel
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
        version = versions.parse(args.version)
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
        if not args.paste:  # a paste file's own store is judged once built (deploy.build)
            defaults.check_store_processes(args.store, args.workers)  # memory:// is one process's
        conf = configure(args)
        app = deploy.build(conf)
    except Exception as exc:  # configuration problems: one clear line, exit 2
        print(f"baremetal-service: cannot start: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    if args.server == "granian":
        # built here to report a configuration error as one line; the worker builds its own
        app.close()
        try:
            check_listen(args.host, args.port)
        except (OSError, ValueError) as exc:
            return _cannot_listen(args, exc)
        connection_limit = connection_limit_that_fits(args.connection_limit)
        # only with --server granian: the module imports granian (~0.1 s, asyncio), which the
        # waitress path never needs
        from .servers import granian as granian_server

        return granian_server.serve(args, conf, _announce, connection_limit=connection_limit)
    deploy.tune_gc()
    deploy.tune_malloc()
    try:
        try:
            server = create_server(app, args)
        except (OSError, ValueError) as exc:  # port in use, address not on this machine, unknown name
            return _cannot_listen(args, exc)
        serve(server, args.host)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        app.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
