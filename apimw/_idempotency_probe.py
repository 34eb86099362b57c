"""The idempotency middleware's look at its store when it is built (both doors)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from apimw._stores import mask_url
from apimw.errors import StoreError

if TYPE_CHECKING:
    from apimw._idempotency_rules import IdempotencyRules

LOG: Final = logging.getLogger("apimw.idempotency")


def probe_store(store: Any, rules: IdempotencyRules) -> None:
    """One quick, bounded look at a network store at startup: a warning if it cannot be reached.

    The middleware keeps running either way (the store may come up later); meanwhile
    requests with a token get 503 (fail_closed) or run unprotected (fail_open).
    """
    ping = getattr(store, "ping", None)
    if not callable(ping):
        return
    try:
        ping()
    except StoreError as exc:
        reason = str(exc)
    except Exception as exc:  # noqa: BLE001 - a custom store's probe must not stop the service
        reason = type(exc).__name__  # its text might quote a URL with a password
    else:
        item_max = getattr(store, "item_size_max", None)
        max_response = rules.keeping.max_response
        if isinstance(item_max, int) and max_response + 512 > item_max:
            LOG.warning(
                "idempotency: the store %s takes items of at most %d bytes, below max_response_bytes "
                "(%d): larger answers are sent with Idempotency-Status: not-stored and not replayed",
                store.name, item_max, max_response,
            )  # fmt: skip
        return
    LOG.warning(
        "idempotency: the store %s cannot be reached at startup (%s); until it can, requests with "
        "a token %s", mask_url(store.name), reason,
        "run unprotected (on_store_error = fail_open)" if rules.fail_open
        else "get 503 idempotency.store-unavailable (on_store_error = fail_closed)",
    )  # fmt: skip
