"""What every replay store shares: the record prefix a fenced write compares, the error for a
record too large, credential masking of store URLs, and the :class:`Store` protocol.

The stores themselves, and :func:`~apimw._stores.open_store` that picks one by URL, are
described in :mod:`apimw._stores`.
"""

from __future__ import annotations

import re
from typing import Final, Protocol

from apimw.errors import StoreError

__all__ = ["PENDING_STATE", "PREFIX_LEN", "RecordTooLarge", "Store", "display_url", "mask_url"]

#: Bytes at the start of a record that fenced writes compare: 32 hex owner id + 1 state byte.
PREFIX_LEN: Final = 33
#: The state byte (``record[PREFIX_LEN - 1]``) of an in-flight claim, which a store never evicts.
PENDING_STATE: Final = b"P"

#: Query parameters whose values are secrets (``redis://h?password=...``).
_SECRET_PARAM: Final = re.compile(
    r"([?&][^=&#]*(?:pass|secret|token|auth|cred)[^=&#]*=)[^&#]*", re.IGNORECASE
)


class RecordTooLarge(StoreError):
    """The store cannot hold a record this large (memcached's item size, memory:// max_bytes).

    Nothing was written: the record that was there (the caller's claim) is unchanged.
    """


def mask_url(url: str) -> str:
    """*url* with its password (and any password-like query parameter) replaced by ``***``.

    Used in every message that echoes a store URL: logs, errors, ``repr``.  Errs on
    the side of masking: everything between ``://`` and the last ``@`` is credentials.
    """
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return "***" if "@" in text else text
    if "@" in rest:
        userinfo, _, hosts = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        # "redis://user:pw@h" keeps the user name; a bare "redis://secret@h" may be a password
        userinfo = f"{user}:***" if colon and "/" not in user else "***"
        rest = f"{userinfo}@{hosts}"
    return scheme + sep + _SECRET_PARAM.sub(r"\1***", rest)


def display_url(url: str) -> str:
    """*url* for logs and ``Store.name``: no credentials and no query (``redis://h:6379/0``)."""
    scheme, sep, rest = str(url).partition("://")
    rest = rest.partition("?")[0].partition("#")[0]
    if not sep:
        return mask_url(url)
    return scheme + sep + rest.rpartition("@")[2]


class Store(Protocol):
    """What the idempotency middleware needs from a backend."""

    #: Short description for logs (no credentials).
    name: str

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        """Store *value* under *key* for *lease* seconds if *key* is absent.

        Return ``None`` when this call created the record, else the record that is
        there (``b""`` if it vanished between the failed create and the read).
        """

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        """Replace the record with *value* for *ttl* seconds if it still starts with *expect*."""

    def release(self, key: str, expect: bytes) -> bool:
        """Delete the record if it still starts with *expect*."""

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        """Give the record *lease* more seconds if it still starts with *expect*."""

    def get(self, key: str) -> bytes | None:
        """The record under *key*, or ``None``."""

    def close(self) -> None:
        """Drop connections (the store may be used again afterwards)."""
