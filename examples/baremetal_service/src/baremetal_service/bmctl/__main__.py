"""``python -m baremetal_service.bmctl`` is ``bmctl``."""

from baremetal_service.bmctl.shell import main

raise SystemExit(main())
