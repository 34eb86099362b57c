"""``baremetal-service``: run the bare-metal API (and its conductor worker) on one port.

    baremetal-service [--host 127.0.0.1] [--port 6385] [--database URL] [--store URL]
                      [--auth-strategy noauth|http_basic --htpasswd FILE]

``--database`` is a SQLAlchemy URL (default: a SQLite file ``baremetal.sqlite``
in the current directory; ``postgresql+psycopg://...`` for PostgreSQL).
``--store`` is the idempotency replay store: ``memory://`` (default),
``redis://host:port/db`` or ``memcached://host:port``.  ``--paste FILE`` builds
the pipeline from an ``api-paste.ini`` instead of in code.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6385
DEFAULT_DATABASE = "sqlite:///baremetal.sqlite"
DEFAULT_STORE = "memory://"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="baremetal-service",
        description="An Ironic-compatible bare-metal provisioning API behind the apimw middlewares.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--database",
        default=os.environ.get("BAREMETAL_DATABASE", DEFAULT_DATABASE),
        help="SQLAlchemy database URL (default: a SQLite file in the current directory)",
    )
    parser.add_argument(
        "--store",
        default=os.environ.get("BAREMETAL_STORE", DEFAULT_STORE),
        help="idempotency replay store URL: memory://, redis://..., memcached://... (default memory://)",
    )
    parser.add_argument("--paste", default=None, help="build the pipeline from this api-paste.ini")
    parser.add_argument(
        "--auth-strategy",
        choices=("noauth", "http_basic"),
        default=os.environ.get("BAREMETAL_AUTH_STRATEGY", "noauth"),
        help="noauth (trusts X-Project-Id; default) or http_basic (htpasswd file with bcrypt entries)",
    )
    parser.add_argument(
        "--htpasswd",
        default=os.environ.get("BAREMETAL_HTPASSWD", "/etc/baremetal/htpasswd"),
        help="the http_basic user file (default /etc/baremetal/htpasswd)",
    )
    parser.add_argument("--threads", type=int, default=8, help="worker threads (default 8)")
    parser.add_argument("--no-conductor", action="store_true", help="do not run the conductor worker")
    parser.add_argument(
        "--enabled-hardware-types",
        default="fake-hardware",
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
        default=60.0,
        help="seconds between power-state syncs with the BMCs; 0 turns the sync off (default 60)",
    )
    parser.add_argument("--debug", action="store_true", help="log at DEBUG level")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port must be between 1 and 65535, got {args.port}")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.power_sync_interval < 0:
        parser.error("--power-sync-interval must be 0 (off) or a positive number of seconds")
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

    etag_key = read_etag_key(args.etag_key_file, os.environ)
    if args.paste:
        return load_paste_app(
            args.paste, database_url=args.database, store_url=args.store, run_conductor=not args.no_conductor,
            etag_key=etag_key,
        )  # fmt: skip
    if args.auth_strategy != "noauth":  # the production stack of wsgi.py (auth, /healthcheck)
        from baremetal_service.wsgi import make_application

        return make_application({
            **os.environ, "BAREMETAL_DATABASE": args.database, "BAREMETAL_STORE": args.store,
            "BAREMETAL_AUTH_STRATEGY": args.auth_strategy, "BAREMETAL_HTPASSWD": args.htpasswd,
            "BAREMETAL_CONDUCTOR_WORKERS": "0" if args.no_conductor else "1",
            **({"BAREMETAL_ETAG_KEY": etag_key.decode("utf-8")} if etag_key else {}),
        })  # fmt: skip
    return build_app(  # serves /healthcheck too
        etag_key=etag_key,
        database_url=args.database,
        store_url=args.store,
        run_conductor=not args.no_conductor,
        enabled_hardware_types=[t.strip() for t in args.enabled_hardware_types.split(",") if t.strip()],
        power_sync_interval=args.power_sync_interval,
    )


def serve(app: Any, host: str, port: int, threads: int) -> None:
    from waitress.server import create_server

    server = create_server(
        app,
        host=host,
        port=port,
        threads=threads,
        ident="baremetal_service",
        clear_untrusted_proxy_headers=True,
        channel_timeout=60,
        connection_limit=1000,
    )

    def _stop(signum: int, frame: Any) -> None:
        server.close()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _stop)
    print(f"baremetal-service: serving on http://{host}:{server.effective_port}", flush=True)  # noqa: T201
    server.run()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    try:
        app = build(args)
    except Exception as exc:  # configuration problems: one clear line, exit 2
        print(f"baremetal-service: cannot start: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    try:
        serve(app, args.host, args.port, args.threads)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        close = getattr(app, "close", None)
        if close is not None:
            close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
