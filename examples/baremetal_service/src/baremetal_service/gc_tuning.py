"""The serving process's garbage-collector settings (``BAREMETAL_GC``, ``--gc``).

CPython's cyclic collector runs a young-generation pass every 700 net container
allocations, and every pass walks all the young objects that are still alive.  A
request that renders 100 full node documents allocates tens of thousands of dicts
and lists that all stay alive until the response is written: with the default
threshold it ran about 3.6 passes (and promoted everything it walked), and now and
then a full pass over the ~126,000 objects of the loaded application.  Measured
in-process (docs/performance.md): about 0.45-2 ms of collector time per detail
request, against about 0.01 ms tuned.

``tuned`` (the default), applied once the application is built:

* ``gc.freeze()``: the objects of the started application (modules, the Flask app,
  SQLAlchemy metadata, compiled statements) move to a permanent generation that no
  pass walks again;
* a young-generation threshold of :data:`YOUNG_THRESHOLD` net allocations: a request
  rarely triggers a pass at all.  Cycles are still collected, a little later.

``default`` leaves the interpreter's settings as they are.
"""

from __future__ import annotations

import gc
from typing import Final

MODES: Final = ("tuned", "default")
DEFAULT_MODE: Final = "tuned"
YOUNG_THRESHOLD: Final = 10_000


def apply(mode: str) -> None:
    """Apply *mode* (one of :data:`MODES`) to this process; call it after the application is built."""
    if mode not in MODES:
        raise ValueError(f"unknown garbage-collector mode {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "default":
        return
    gc.collect()  # what start-up left as garbage goes now, not into the permanent generation
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, _young), middle, old)
