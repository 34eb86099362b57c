"""``baremetal-service --server granian``: the service behind granian.

granian (https://github.com/emmett-framework/granian) is an HTTP server written in
Rust with a WSGI interface: it parses HTTP, keeps connections and idle timeouts on
its own threads, and calls the application on a pool of Python threads.  It answers
most requests faster than waitress, the default (docs/example/baremetal-service.md, "Server",
has the measurements and what each server withstands).

How the command runs it:

* The application is built once in the command's own process first, exactly as with
  waitress, so a configuration error is still one line and exit 2; then it is closed.
  The worker builds it again from the same settings (:data:`SETTINGS_ENV`), with
  :func:`baremetal_service.deploy.build`.
* The address is checked the same way (port in use, an address not on this machine,
  a name that does not resolve: one line, exit 2) before granian binds it.
* granian's main process binds the port and starts ``--workers`` worker processes (1 by
  default), each of which builds the application again (forked, the imports are shared:
  about 0.2 s) and serves it with ``--threads`` application slots.  More than one worker
  needs a shared replay store (``memory://`` is refused) and one etag key: the
  ``--etag-key-file`` or ``BAREMETAL_ETAG_KEY`` one, else a random key made at start
  and handed to every worker.  SIGTERM or SIGINT stop it cleanly (exit 0):
  requests in progress finish and the worker closes the application (conductor,
  database pool).  The worker stops with its parent, should the parent be killed.
* ``--idle-timeout`` is granian's header-read timeout: a keep-alive connection that
  sends no request for that long is closed (granian caps it at 60 s).
* ``--connection-limit`` is granian's backpressure: the most connections a worker holds.
  An idle connection costs a descriptor and no thread; the command raises the descriptor
  soft limit as for waitress, and beyond the limit new connections wait in the listen
  backlog until others close.
* A request waits for its body on a request thread of its own, then takes one of the
  ``--threads`` application slots (:class:`BodyFirst`).  granian may start one request
  thread per connection it holds (``--connection-limit``), on demand, and retires them
  after :data:`IDLE_THREAD_SECONDS` unused: clients sending their bodies slowly are bounded
  by the connection limit, as with waitress, not by a thread count.
* A request granian cannot parse gets its own ``400 Bad Request`` with an empty body
  and ``connection: close``; everything else reaches the application.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import json
import multiprocessing.util
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

# granian is imported with this module, which only ``baremetal-service --server granian``
# imports (cli.main): the waitress path never loads it (~0.1 s, asyncio).
from granian import Granian
from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.log import LogLevels

from baremetal_service import deploy
from baremetal_service.handlers.common import MAX_BODY_BYTES

#: The settings handed to the worker process (JSON: the settings dict and ``threads``).
SETTINGS_ENV = "BAREMETAL_SERVICE_SETTINGS"
#: Variables holding secrets that granian would otherwise copy into every request's environ
#: (its WSGI environ starts from ``os.environ``): the worker drops them once built.
SECRET_ENV = ("BAREMETAL_ETAG_KEY", SETTINGS_ENV)
#: Seconds an unused request thread lives before granian retires it.
IDLE_THREAD_SECONDS = 30


def request_threads(connection_limit: int, app_threads: int) -> int:
    """granian's request threads per worker: one per connection it may hold, since each holds
    a request until its body is complete (:class:`BodyFirst`); ``--threads`` of them run the
    application.  (512 before: from about 512 clients sending bodies slowly, a new client got
    no answer.)"""
    return max(connection_limit, app_threads)


#: granian's limit for its header-read timeout, in seconds.
MAX_IDLE_TIMEOUT = 60


def _die_with_parent() -> None:
    """Linux: the worker gets SIGTERM when granian's main process dies (even by SIGKILL)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the worker outlives a SIGKILL
        pass


class _UnreadableBody(io.RawIOBase):
    """A request body whose reading failed (bad chunked framing, a client gone): every read raises,
    as the server's own stream did, so the application answers its JSON 400."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self._error = error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise OSError(f"the request body could not be read: {self._error}")


class BodyFirst:
    """Read the whole request body (up to *limit* + 1 bytes) before taking one of *slots* threads
    of the application.

    granian calls the application on a request thread as soon as the headers are in, and the
    body arrives while the application reads it: a client sending its body one byte a second
    held a thread for as long, and ``--threads`` such clients stopped the service.  The body is
    read on one of granian's request threads instead (:func:`request_threads`; the GIL is
    released while it waits), and only a complete body takes one of the ``--threads``
    application slots.  A body
    declared larger than *limit* is not read: the application refuses it at once (413).
    """

    def __init__(self, app: Any, *, slots: int, limit: int) -> None:
        self._app = app
        self._slots = threading.BoundedSemaphore(slots)
        self._limit = limit

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        declared = environ.get("CONTENT_LENGTH") or ""
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            wanted = self._limit + 1  # one byte more tells the application it is too large
        else:
            wanted = int(declared) if declared.isdigit() else 0
        if 0 < wanted <= self._limit + 1:
            stream = environ["wsgi.input"]
            try:
                parts = []
                while wanted > 0 and (part := stream.read(wanted)):
                    parts.append(part)
                    wanted -= len(part)
                environ["wsgi.input"] = io.BytesIO(b"".join(parts))
            except Exception as exc:  # noqa: BLE001 - any failure of the server's stream
                environ["wsgi.input"] = _UnreadableBody(exc)
        with self._slots:
            return self._app(environ, start_response)

    def close(self) -> None:
        close = getattr(self._app, "close", None)
        if close is not None:
            close()


def load_application(_target: str) -> Any:
    """granian's target loader, run in the worker process: the application from :data:`SETTINGS_ENV`."""
    _die_with_parent()
    handed = json.loads(os.environ[SETTINGS_ENV])
    app = BodyFirst(deploy.build(handed["settings"]), slots=handed["threads"], limit=MAX_BODY_BYTES)
    # run when the worker process ends (multiprocessing's exit hook)
    multiprocessing.util.Finalize(app, app.close, exitpriority=10)
    for name in SECRET_ENV:
        os.environ.pop(name, None)
    deploy.tune_gc()
    deploy.tune_malloc()
    return app


def serve(
    args: argparse.Namespace,
    conf: Mapping[str, Any],
    announce: Callable[[str], None],
    *,
    connection_limit: int,
) -> int:
    """Serve the service built from *conf* (the settings dict) with granian until SIGTERM/SIGINT;
    the exit status.  *args*: the command's options (address, workers, threads, timeouts)."""
    conf = dict(conf)
    if args.workers > 1 and not conf["etag_key"]:
        # every worker must compute the same etags: one key for all of them, made here
        conf["etag_key"] = secrets.token_hex(32)
    os.environ[SETTINGS_ENV] = json.dumps({"settings": conf, "threads": args.threads})
    server = Granian(
        "baremetal_service.deploy:application",  # a label only: load_application builds it
        address=args.host,
        port=args.port,
        interface=Interfaces.WSGI,
        workers=args.workers,
        blocking_threads=request_threads(connection_limit, args.threads),
        blocking_threads_idle_timeout=IDLE_THREAD_SECONDS,
        runtime_blocking_threads=request_threads(connection_limit, args.threads),
        backlog=1024,
        # granian's backpressure is the most connections a worker holds at once (its default,
        # backlog / workers, let 1,024 idle connections lock every other client out)
        backpressure=connection_limit,
        http=HTTPModes.http1,
        http1_settings=HTTP1Settings(
            header_read_timeout=min(args.idle_timeout, MAX_IDLE_TIMEOUT) * 1000, keep_alive=True
        ),
        log_level=LogLevels.debug if args.debug else LogLevels.error,
        respawn_failed_workers=False,
    )
    announce(f"http://{args.host}:{args.port}")
    try:
        server.serve(target_loader=load_application)
    except SystemExit as stop:  # granian exits 1 when its worker died
        code = stop.code if isinstance(stop.code, int) else 1
        if code:
            print("baremetal-service: the granian worker process exited unexpectedly", file=sys.stderr)  # noqa: T201
        return code
    return 0
