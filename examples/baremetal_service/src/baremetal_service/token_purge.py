"""The periodic purge of recorded client tokens (:mod:`apimw.idempotency_db`).

Every create with an ``X-Client-Token`` records ``(scope, token)`` in the
``client_tokens`` table in the same transaction as the row (the durable half of
replay). Those rows are only needed while clients may still retry: the service that
runs the conductor removes the ones older than *retention* every *interval* seconds,
so the table stays bounded.
"""

from __future__ import annotations

import logging
import threading

from apimw.idempotency_db import DEFAULT_RETENTION

from .db.api import Database

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_RETENTION", "TokenPurge"]

LOG = logging.getLogger(__name__)

#: Seconds between purges.
DEFAULT_INTERVAL = 3600.0


class TokenPurge:
    """Run ``db.purge_client_tokens(retention)`` every *interval* seconds in a daemon thread."""

    def __init__(
        self, db: Database, *, interval: float = DEFAULT_INTERVAL, retention: float = DEFAULT_RETENTION
    ) -> None:
        if not interval > 0:
            raise ValueError("interval must be a positive number of seconds")
        if not retention >= 0:
            raise ValueError("retention must be a number of seconds, 0 or more")
        self.db = db
        self.interval = interval
        self.retention = retention
        self.purged = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="token-purge", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def run_once(self) -> int:
        removed = self.db.purge_client_tokens(self.retention)
        self.purged += removed
        return removed

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.run_once()
            except Exception:  # a database hiccup must not end the task
                LOG.exception("client token purge failed")
