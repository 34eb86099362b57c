"""Sample gunicorn configuration for the bare-metal service (see docs/example/production.md).

    export BAREMETAL_DATABASE=postgresql+psycopg://baremetal:secret@db.example.com/baremetal
    export BAREMETAL_STORE=redis://cache.example.com:6379/0
    export BAREMETAL_ETAG_KEY=$(cat /etc/baremetal/etag.key)
    gunicorn -c python:baremetal_service.servers.gunicorn_conf baremetal_service.deploy:application

Command-line flags override these values (``-w 8``, ``-b 127.0.0.1:7000``).
Every value can also come from the environment variables named below.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from gunicorn.errors import AppImportError

from baremetal_service import settings
from baremetal_service.servers import connection_limit_that_fits

# -- where and how many ---------------------------------------------------------------------
# Loopback only: put a TLS-terminating proxy (nginx, haproxy) in front.
bind = [os.environ.get("BAREMETAL_BIND", f"{settings.HOST}:{settings.PORT}")]
# Processes give CPU parallelism (one GIL each).  Every process also runs its conductor thread(s).
workers = int(os.environ.get("BAREMETAL_WORKERS", "4"))
# gevent: each connection is a greenlet, so a client sending its body slowly or an idle
# connection costs no thread.  gthread gave each its thread (5 s for a silent connection,
# as long as the body takes for a slow one): 16 slow clients or 5,000 idle connections
# made every other client wait (docs/example/production.md, "Slow and idle clients").
worker_class = "gevent"
# Connections per worker process, idle ones included (4 x 2,500 = the CLI's 10,000).
worker_connections = int(os.environ.get("BAREMETAL_WORKER_CONNECTIONS", "2500"))
# Each process builds its own database pool, store connections and conductor threads
# after the fork: never preload (threads and sockets do not survive a fork).
preload_app = False

# -- time limits ----------------------------------------------------------------------------
# A request that takes longer is killed with its worker.  Keep the idempotency
# middleware's `lease` (300 s by default) above this, so a retry never runs alongside
# a request that is still in progress.
timeout = int(os.environ.get("BAREMETAL_TIMEOUT", "60"))
graceful_timeout = 30
keepalive = 5
# Recycle processes now and then (bounded memory growth), not all at once.
max_requests = 20000
max_requests_jitter = 2000

# -- safety -----------------------------------------------------------------------------------
limit_request_line = 8190
limit_request_fields = 100
# Trust X-Forwarded-* only from the local proxy.
forwarded_allow_ips = "127.0.0.1"
# BAREMETAL_ACCESS_LOG="" switches the access log off
accesslog = os.environ.get("BAREMETAL_ACCESS_LOG", "-") or None
errorlog = "-"
loglevel = os.environ.get("BAREMETAL_LOG_LEVEL", "info")
proc_name = "baremetal-api"
# gunicorn >= 25 opens a control socket in $XDG_RUNTIME_DIR or ~/.gunicorn by default;
# one per user clashes when several instances run.  Enable it with a path if you use gunicornc.
control_socket_disable = True


# -- hooks ----------------------------------------------------------------------------------


def on_starting(server: Any) -> None:
    """In the master, before any worker exists: raise the descriptor limit, refuse --preload, and
    memory:// with several workers.

    The worker count is also exported to the workers (BAREMETAL_WORKER_PROCESSES), so
    baremetal_service.deploy refuses it again when it builds the application.
    """
    # the descriptor soft limit up to what worker_connections needs (the workers inherit it),
    # else fewer connections per worker (said once)
    wanted = int(server.cfg.worker_connections)
    fitted = connection_limit_that_fits(wanted)
    if fitted < wanted:
        server.cfg.set("worker_connections", fitted)
    if server.cfg.preload_app:
        raise RuntimeError(
            "baremetal-service: preload_app (--preload) is not supported: the database pool, store "
            "connections and conductor threads must be created in each worker, after the fork"
        )
    processes = int(server.cfg.workers)
    store = os.environ.get("BAREMETAL_STORE") or settings.STORE
    try:
        settings.check_store_processes(store, processes)
    except Exception as exc:  # gunicorn prints a RuntimeError as "Error: ..." and exits 1
        raise RuntimeError(f"baremetal-service: {exc}") from None
    os.environ["BAREMETAL_WORKER_PROCESSES"] = str(processes)


def post_fork(server: Any, worker: Any) -> None:
    """In the worker: a configuration error at load is one line, not a traceback.

    gunicorn prints an ``AppImportError`` as its message alone and stops (exit 4); anything
    else raised while the worker builds the application came with its traceback.
    """
    load = worker.load_wsgi

    def load_wsgi() -> None:
        try:
            load()
        except Exception as exc:
            raise AppImportError(f"baremetal-service: cannot start: {exc}") from None

    worker.load_wsgi = load_wsgi


def pre_fork(server: Any, worker: Any) -> None:
    """Before each fork: tell the worker how many processes serve now (TTIN can add some)."""
    os.environ["BAREMETAL_WORKER_PROCESSES"] = str(max(int(server.cfg.workers), int(server.num_workers)))


def worker_exit(server: Any, worker: Any) -> None:
    """Stop this process's conductor threads and close its pool and store connections.

    The worker imported :mod:`baremetal_service.deploy` when it loaded the application; the
    master never does (this file runs there too: the application's modules, their locks
    and sockets, belong after the fork and after gevent's patching in each worker).
    """
    deploy = sys.modules.get("baremetal_service.deploy")
    if deploy is not None:  # not loaded: nothing was built in this worker
        deploy.close_application()
