"""``bmctl``: a command line for the example bare-metal service (and OpenStack Ironic), on cliff.

:class:`~baremetal_service.bmctl.client.BaremetalClient` is the same thing as a Python API.
"""

from __future__ import annotations

from baremetal_service.bmctl.shell import main

__all__ = ["main"]
