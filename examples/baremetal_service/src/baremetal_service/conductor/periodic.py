"""A task run every *interval* seconds in a daemon thread (the power sync, the token purge)."""

from __future__ import annotations

import logging
import threading
from typing import Any

LOG = logging.getLogger(__name__)


class PeriodicTask:
    """Call :meth:`run_once` every *interval* seconds in a daemon thread named *name*.

    A pass that raises is logged and the next one runs on time: a database hiccup must
    not end the task.  Subclasses implement :meth:`run_once`.
    """

    #: the thread's name, and the words of the log line when a pass fails
    name = "periodic-task"

    def __init__(self, *, interval: float) -> None:
        if not interval > 0:
            raise ValueError("interval must be a positive number of seconds")
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def run_once(self) -> Any:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.run_once()
            except Exception:
                LOG.exception("%s pass failed", self.name)
