"""The periodic purge of recorded client tokens (:mod:`apimw.idempotency_db`).

Every create with an ``X-Client-Token`` records ``(scope, token)`` in the
``client_tokens`` table in the same transaction as the row (the durable half of
replay). Those rows are only needed while clients may still retry: the service that
runs the conductor removes the ones older than *retention* every *interval* seconds,
so the table stays bounded.
"""

from __future__ import annotations

from apimw.idempotency_db import DEFAULT_RETENTION
from baremetal_service.conductor.periodic import PeriodicTask
from baremetal_service.db.api import Database

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_RETENTION", "TokenPurge"]

#: Seconds between purges.
DEFAULT_INTERVAL = 3600.0


class TokenPurge(PeriodicTask):
    """Run ``db.purge_client_tokens(retention)`` every *interval* seconds in a daemon thread."""

    name = "token-purge"

    def __init__(
        self, db: Database, *, interval: float = DEFAULT_INTERVAL, retention: float = DEFAULT_RETENTION
    ) -> None:
        super().__init__(interval=interval)
        if not retention >= 0:
            raise ValueError("retention must be a number of seconds, 0 or more")
        self.db = db
        self.retention = retention
        self.purged = 0

    def run_once(self) -> int:
        removed = self.db.purge_client_tokens(self.retention)
        self.purged += removed
        return removed
