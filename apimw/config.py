"""Parsing configuration values the way apimw's middlewares do (paste ``.ini`` strings).

For applications that read their own settings from the same places as apimw's
(a paste section, environment variables): the same spellings are accepted and the
same :class:`~apimw.errors.ConfigError` is raised for anything else.

* :func:`as_bool`: ``true/false``, ``yes/no``, ``on/off``, ``1/0`` (any case);
* :func:`as_int`: ASCII digits with an optional ``-``;
* :func:`as_float`: any float literal;
* :func:`as_list`: comma or newline separated, items stripped, empty items dropped.

Values that already have the type (``True``, ``3``) are returned as they are.
"""

from __future__ import annotations

from apimw._config import as_bool, as_float, as_int, as_list

__all__ = ["as_bool", "as_float", "as_int", "as_list"]
