"""How the service's resources get their etags (the one etag function is apimw's).

:func:`make_generator` builds the :class:`apimw.etag.ETagGenerator` the data API
uses for every create and modify (``Database._new_etag``).  It hashes the
resource's API document (Ironic field names; internal columns dropped) minus the
fields the ironic-etag spec ignores:

* node: ``driver_internal_info``, ``etag``, ``updated_at``;
* every other resource: ``etag``, ``updated_at``;

and minus the node's conductor lease (``reservation``): a lock rather than
resource data, taken and dropped by the workers, which must not make every
client's If-Match stale.  The result is a weak validator ``W/"<128 hex>"``,
HMAC-SHA-512 under the deployment's key, so an etag never lets anyone test
guesses of the masked ``driver_info`` secrets it covers.

:data:`IGNORED_FIELDS` is the built-in table; the caller adds each resource's own
(``make_generator(key, ignored)``: the service passes its declarations' ``etag_ignored``),
so the data layer never imports the resources above it.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Final

from apimw.etag import DEFAULT_IGNORED_FIELDS, ETagGenerator

__all__ = ["IGNORED_FIELDS", "make_generator"]

IGNORED_FIELDS: Final[dict[str, frozenset[str]]] = {
    **DEFAULT_IGNORED_FIELDS,
    "node": DEFAULT_IGNORED_FIELDS["node"] | {"reservation"},
}


def make_generator(
    key: str | bytes | None = None, ignored_fields: Mapping[str, frozenset[str]] | None = None
) -> ETagGenerator:
    """The generator for *key* (the same key the etag middleware is given, if any).

    *ignored_fields*: data-API kind -> the fields its etag leaves out, on top of (and in
    place of, per kind) :data:`IGNORED_FIELDS`.  Without a key a random one is drawn for
    this process: etags stay correct (the stored etag is authoritative; it is only
    recomputed when the resource changes), but processes sharing a database should share
    a key so that equal states get equal etags everywhere.
    """
    ignored = {**IGNORED_FIELDS, **(ignored_fields or {})}
    return ETagGenerator(key=key or secrets.token_bytes(32), ignored_fields=ignored)
