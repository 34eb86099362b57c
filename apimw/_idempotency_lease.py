"""Lease renewal: the claims of requests whose app is still running keep their token.

With ``renew_lease = true`` a claim is renewed every ``lease / 3`` seconds while its
app runs, so a request slower than the lease is never run a second time by a retry.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Final

from apimw._stores import Store
from apimw.errors import StoreError

LOG: Final = logging.getLogger("apimw.idempotency")


class Renewer:
    """One daemon thread that renews the leases of the claims whose app is still running.

    Each renewal is owner-checked (``Store.extend``), so a claim that was lost is never
    renewed for its new owner.  The lock guards the table of claims only, never a store
    call: :meth:`add` and :meth:`remove` (called on the request's thread, or an event
    loop) never wait for the store.  A renewal that runs after its claim was completed,
    released or tombstoned is refused by the store (the record no longer starts with the
    claim's prefix), so it changes nothing.
    """

    def __init__(self, store: Store, lease: float) -> None:
        self.store = store
        self.lease = lease
        self.every = lease / 3
        self.claims: dict[tuple[str, bytes], float] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stopped = False
        self.thread: threading.Thread | None = None

    def add(self, key: str, prefix: bytes) -> None:
        with self.lock:
            self.claims[(key, prefix)] = time.monotonic() + self.every
            if self.thread is None or not self.thread.is_alive():
                self.stopped = False
                self.thread = threading.Thread(target=self._loop, name="apimw-idempotency-renew", daemon=True)
                self.thread.start()

    def remove(self, key: str, prefix: bytes) -> None:
        with self.lock:
            self.claims.pop((key, prefix), None)

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()
        thread = self.thread
        if thread is not None:
            thread.join(5)
        self.wake.clear()

    def _renew(self, claim: tuple[str, bytes]) -> None:
        try:
            kept = self.store.extend(claim[0], claim[1], self.lease)
        except StoreError as exc:
            LOG.warning("idempotency: renewing a claim failed: %s", exc)
            kept = True  # try again next time; the lease may still hold
        with self.lock:
            if claim in self.claims:  # not removed meanwhile
                if kept:
                    self.claims[claim] = time.monotonic() + self.every
                else:
                    del self.claims[claim]

    def _loop(self) -> None:
        while not self.stopped:
            now = time.monotonic()
            with self.lock:
                due = [claim for claim, at in self.claims.items() if at <= now]
                nearest = min(self.claims.values(), default=now + self.every)
            for claim in due:
                self._renew(claim)
            self.wake.wait(max(0.01, nearest - time.monotonic()))
