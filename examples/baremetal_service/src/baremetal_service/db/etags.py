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

Each resource's ignored fields are its declaration's ``etag_ignored``
(:mod:`baremetal_service.resources`); :data:`IGNORED_FIELDS` is the built-in table the
declarations must agree with (a test checks it).
"""

from __future__ import annotations

import secrets
from typing import Final

from apimw.etag import DEFAULT_IGNORED_FIELDS, ETagGenerator

__all__ = ["IGNORED_FIELDS", "make_generator"]

IGNORED_FIELDS: Final[dict[str, frozenset[str]]] = {
    **DEFAULT_IGNORED_FIELDS,
    "node": DEFAULT_IGNORED_FIELDS["node"] | {"reservation"},
}


def make_generator(key: str | bytes | None = None) -> ETagGenerator:
    """The generator for *key* (the same key the etag middleware is given, if any).

    Without a key a random one is drawn for this process: etags stay correct (the
    stored etag is authoritative; it is only recomputed when the resource changes),
    but processes sharing a database should share a key so that equal states get
    equal etags everywhere.
    """
    return ETagGenerator(key=key or secrets.token_bytes(32), ignored_fields=ignored_fields())


def ignored_fields() -> dict[str, frozenset[str]]:
    """Data-API kind -> the fields its etag leaves out, from the resource declarations."""
    from ..resources import declarations  # the declarations import the data API: not at import time

    out = dict(IGNORED_FIELDS)
    out.update({d.store_kind: d.etag_ignored for d in declarations() if not d.read_only})
    return out
