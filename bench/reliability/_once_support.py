"""Pieces shared by the exactly_once and lost_update scenarios."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from bench.reliability._harness import Client

PID_HEADER = "x-baremetal-worker-pid"


class ReplyCounts:
    """Which worker processes answered, and how many answers were 5xx or no answer at all."""

    def __init__(self) -> None:
        self.server_errors = 0
        self.connection_errors = 0
        self.pids: set[int] = set()

    def count(self, reply: Any) -> None:
        if PID_HEADER in reply.headers:
            self.pids.add(int(reply.headers[PID_HEADER]))
        if reply.status == 0:
            self.connection_errors += 1
        elif reply.status >= 500:
            self.server_errors += 1


def connect_spread(clients: list[Client], workers: int) -> Counter[int]:
    """Open the clients' connections one by one, an equal share on each gunicorn worker.

    A keep-alive connection stays on the worker that accepted it, and connections opened all
    at once tend to be accepted by one worker; so each is opened (``GET /healthcheck``) and
    opened again while its worker already has its share (bounded).  Connections per worker pid.
    """
    spread: Counter[int] = Counter()
    share = -(-len(clients) // workers)
    pid = 0
    for client in clients:
        for attempt in range(50):  # bounded: a worker that never accepts leaves the spread uneven
            reply = client.get("/healthcheck")
            pid = int(reply.headers.get(PID_HEADER, "0"))
            if reply.status == 200 and spread[pid] < share:
                break
            client.close()
            # give the other workers a moment to reach accept(): on a loaded machine the worker
            # that just answered otherwise wins every race for the next connection
            time.sleep(0.02 * min(attempt + 1, 5))
        spread[pid] += 1
    return spread
