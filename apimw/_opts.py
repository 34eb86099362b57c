"""oslo-config-generator entry point: every apimw middleware's options."""

from __future__ import annotations

from typing import Any


def list_opts() -> list[tuple[str, list[Any]]]:
    from apimw import microversion

    groups = list(microversion.list_opts())
    for name in ("etag", "idempotency"):
        try:
            module = __import__(f"apimw.{name}", fromlist=["list_opts"])
        except ModuleNotFoundError:  # pragma: no cover - only while a module is being written
            continue
        groups.extend(module.list_opts())
    return groups
