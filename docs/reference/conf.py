"""Sphinx configuration of apimw's API reference, generated from the docstrings.

Build it (warnings are errors, as in CI)::

    pip install -r docs/reference/requirements.txt
    python -m sphinx -W --keep-going -b html docs/reference build/reference

The modules are imported, so the extras their docstrings name must be installed
(``pip install '.[redis,memcached,flask,webob,paste,oslo,client,sqlalchemy,prometheus,otel]'``).
"""

from __future__ import annotations

import importlib
from typing import Any

import apimw

project = "apimw"
author = "The apimw authors"
copyright = "The apimw authors"  # noqa: A001 - Sphinx's name for it
release = apimw.__version__
version = release

extensions = ["sphinx.ext.autodoc", "sphinx.ext.intersphinx", "sphinx.ext.viewcode"]
exclude_patterns = ["_build"]
root_doc = "index"
html_theme = "alabaster"
html_title = f"apimw {release} reference"

# Signatures in the order of the source, with their type hints in the description.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# The docstrings link to the standard library only (no network at build time).
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
# The build fails on what breaks the reference (a module that does not import, an object
# described twice, a missing page) but not on the reStructuredText markup inside a docstring,
# which docutils reports as a "docutils" warning: a docstring's wording and markup change with
# the code, and the page still shows its text. To list them: add ``-D suppress_warnings=none``.
suppress_warnings = ["docutils"]


# -- one page documents each object ----------------------------------------------------------
# A public module documents the names of its ``__all__`` (``:imported-members:``: many are
# defined in private modules). A name several public modules export is documented once, on the
# page of the module that defines it if that one is public, else on the first page of PAGES
# that exports it; the other pages leave it out (Sphinx warns on a duplicate description).

#: docname -> module, in the order of index.rst
PAGES = {
    "apimw": "apimw",
    "microversion": "apimw.microversion",
    "etag": "apimw.etag",
    "etag_db": "apimw.etag_db",
    "idempotency": "apimw.idempotency",
    "idempotency_db": "apimw.idempotency_db",
    "asgi": "apimw.asgi",
    "client": "apimw.client",
    "client_resources": "apimw.client_resources",
    "errors": "apimw.errors",
    "metrics": "apimw.metrics",
    "metrics_prometheus": "apimw.metrics_prometheus",
    "metrics_otel": "apimw.metrics_otel",
    "config": "apimw.config",
    "discovery": "apimw.discovery",
    "webob": "apimw.webob",
}


def _homes() -> dict[int, str]:
    """id(object) -> the module whose page documents it."""
    public = set(PAGES.values())
    home: dict[int, str] = {}
    for module_name in PAGES.values():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            defined_in = getattr(obj, "__module__", None)
            if defined_in in public:
                home.setdefault(id(obj), defined_in)
            else:
                home.setdefault(id(obj), module_name)
    return home


def _documented_elsewhere(module_name: str, home: dict[int, str]) -> list[str]:
    module = importlib.import_module(module_name)
    return [n for n in getattr(module, "__all__", ()) if home.get(id(getattr(module, n))) != module_name]


def _exclude_duplicates(app: Any, docname: str, source: list[str]) -> None:
    module_name = PAGES.get(docname)
    if module_name is None:
        return
    elsewhere = _documented_elsewhere(module_name, _homes())
    if elsewhere:
        option = "   :imported-members:\n"
        source[0] = source[0].replace(option, f"{option}   :exclude-members: {', '.join(elsewhere)}\n", 1)


def setup(app: Any) -> None:
    app.connect("source-read", _exclude_duplicates)
