"""Compatibility only: the microversion type moved to :mod:`apimw._microversion_type`.

Kept while the example service still imports ``apimw._version``; may be removed once nothing
does.  Use the public ``apimw.Version`` / ``apimw.parse_version``.
"""

from __future__ import annotations

from apimw._microversion_type import LATEST, MAX_VERSION_LENGTH, Version, parse_version

__all__ = ["LATEST", "MAX_VERSION_LENGTH", "Version", "parse_version"]
