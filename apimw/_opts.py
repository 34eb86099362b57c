"""oslo-config-generator entry point: every apimw middleware's options."""

from __future__ import annotations

from typing import Any

from apimw import etag, idempotency, microversion


def list_opts() -> list[tuple[str, list[Any]]]:
    return [*microversion.list_opts(), *etag.list_opts(), *idempotency.list_opts()]
