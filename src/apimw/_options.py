"""Compatibility only: the option tables moved to :mod:`apimw._config`.

Kept while the example service still imports ``apimw._options``; may be removed once nothing
does.
"""

from __future__ import annotations

from apimw._config import (
    Option,
    as_bool,
    as_float,
    as_int,
    as_list,
    as_optional_str,
    as_str,
    check_required,
    convert_strings,
    flask_wrap,
    from_oslo,
    make_filter_factory,
    options_table,
    oslo_opts,
    paste_section,
)

__all__ = [
    "Option",
    "as_bool",
    "as_float",
    "as_int",
    "as_list",
    "as_optional_str",
    "as_str",
    "check_required",
    "convert_strings",
    "flask_wrap",
    "from_oslo",
    "make_filter_factory",
    "options_table",
    "oslo_opts",
    "paste_section",
]
