"""apimw's test suite.

The package sits at the repository root (``apimw/``), so a test runner or a ``python -m tests.x``
subprocess that puts the root on ``sys.path`` first would import the source tree instead of the
installed wheel.  Under scripts/test (``APIMW_TEST_INSTALLED``) the root goes to the end of the path
before anything imports apimw, so the installed copy is found first and ``tests`` still imports;
tests/test_wheels.py checks which copy each process got.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if os.environ.get("APIMW_TEST_INSTALLED"):
    _root = Path(__file__).resolve().parents[1]
    _front = [entry for entry in sys.path if Path(entry or ".").resolve() == _root]
    sys.path[:] = [entry for entry in sys.path if entry not in _front] + _front
