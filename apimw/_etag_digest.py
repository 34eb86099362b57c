"""The keyed etag digest: :class:`ETagGenerator` (HMAC-SHA-512 or SHA-512 over canonical JSON)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Any, Final

from apimw._canonical_json import TIMESPECS, canonical_json
from apimw._config import as_list
from apimw.errors import ConfigError

#: The Ironic spec's ignored fields per resource type.
DEFAULT_IGNORED_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "node": frozenset({"driver_internal_info", "etag", "updated_at"}),
    "port": frozenset({"etag", "updated_at"}),
    "portgroup": frozenset({"etag", "updated_at"}),
    "chassis": frozenset({"etag", "updated_at"}),
}
_FALLBACK_IGNORED: Final = frozenset({"etag", "updated_at"})
ALGORITHMS: Final = ("hmac-sha512", "sha512")
MIN_KEY_BYTES: Final = 16


class ETagGenerator:
    """Computes a resource's etag when the app saves it.

    :param key: the deployment secret for HMAC-SHA-512 (at least 16 bytes).  Keyed by
        default so that no reader can guess a masked secret (a BMC password in
        ``driver_info``) offline from the public etag; required unless
        ``algorithm="sha512"``.
    :param algorithm: ``"hmac-sha512"`` (default) or ``"sha512"`` (the spec's plain hash).
    :param ignored_fields: resource type -> top-level fields left out of the hash
        (defaults to the Ironic spec's table); types not listed ignore ``etag`` and
        ``updated_at``.
    :param weak: emit ``W/"..."`` (default, the spec) or strong ``"..."`` tags (only with
        the middleware's ``strict_rfc9110``).
    :param timespec: datetime precision hashed; use your datastore's (``"seconds"`` for
        MySQL ``DATETIME`` without fractional seconds).
    """

    __slots__ = ("_key", "_hmac", "_plain", "_ignored", "weak", "timespec", "algorithm")

    def __init__(
        self,
        *,
        key: bytes | str | None = None,
        algorithm: str = "hmac-sha512",
        ignored_fields: Mapping[str, str | Iterable[str]] = DEFAULT_IGNORED_FIELDS,
        weak: bool = True,
        timespec: str = "microseconds",
    ) -> None:
        if algorithm not in ALGORITHMS:
            raise ConfigError(f"etag algorithm must be one of {', '.join(ALGORITHMS)}; got {algorithm!r}")
        if timespec not in TIMESPECS:
            raise ConfigError(f"etag timespec must be one of {', '.join(TIMESPECS)}; got {timespec!r}")
        raw_key = key.encode("utf-8") if isinstance(key, str) else key
        if algorithm == "hmac-sha512" and (not raw_key or len(raw_key) < MIN_KEY_BYTES):
            raise ConfigError(
                f"etag algorithm hmac-sha512 needs a secret key of at least {MIN_KEY_BYTES} bytes "
                "(set hmac_key, or choose algorithm sha512 knowingly)"
            )
        self.algorithm = algorithm
        self._plain = algorithm == "sha512"
        self._key = raw_key or b""
        # The key set up once (RFC 2104 pads hashed); each digest copies this state.
        self._hmac = hmac.new(self._key, digestmod=hashlib.sha512)
        # a field list given as one string ("etag, updated_at") as a paste ini reads it
        self._ignored = {name: frozenset(as_list(fields)) for name, fields in ignored_fields.items()}
        self.weak = weak
        self.timespec = timespec

    def __repr__(self) -> str:  # never show the key
        return f"ETagGenerator(algorithm={self.algorithm!r}, weak={self.weak})"

    def __reduce__(self) -> tuple[Any, ...]:  # copy, deepcopy, pickle: rebuilt (hash objects don't pickle)
        options = {"key": self._key or None, "algorithm": self.algorithm, "ignored_fields": self._ignored}
        return (_generator, (options, self.weak, self.timespec))

    def ignored(self, resource_type: str | None) -> frozenset[str]:
        if resource_type is None:
            return _FALLBACK_IGNORED
        return self._ignored.get(resource_type, _FALLBACK_IGNORED)

    def digest(self, doc: Mapping[str, Any], resource_type: str | None = None) -> str:
        """The 128 hex digits for *doc* (store these, or the wire form from :meth:`etag`)."""
        ignored = self.ignored(resource_type)
        if type(doc) is dict and doc.keys().isdisjoint(ignored):
            fields: Any = doc  # nothing to drop: canonical_json never changes its argument
        else:
            fields = dict(doc)
            for name in ignored:
                fields.pop(name, None)
        data = canonical_json(fields, timespec=self.timespec)
        if self._plain:
            return hashlib.sha512(data).hexdigest()
        mac = self._hmac.copy()
        mac.update(data)
        return mac.hexdigest()

    def etag(self, doc: Mapping[str, Any], resource_type: str | None = None) -> str:
        """The wire form ``W/"<128 hex>"``: the ETag header and the body ``etag`` field."""
        digest = self.digest(doc, resource_type)
        return f'W/"{digest}"' if self.weak else f'"{digest}"'  # format_etag(), inline


def _generator(options: dict[str, Any], weak: bool, timespec: str) -> ETagGenerator:
    return ETagGenerator(**options, weak=weak, timespec=timespec)
