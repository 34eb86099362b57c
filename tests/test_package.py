"""The public surface stays honest: sorted, importable __all__, resolvable entry points."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

import pytest

import apimw

MODULES = [
    "apimw",
    "apimw.client",
    "apimw.config",
    "apimw.discovery",
    "apimw.errors",
    "apimw.etag",
    "apimw.etag_db",
    "apimw.idempotency",
    "apimw.metrics",
    "apimw.metrics_otel",
    "apimw.metrics_prometheus",
    "apimw.microversion",
    "apimw.webob",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    # isort style: CONSTANTS, then Classes, then functions, each alphabetical
    assert exported == sorted(exported, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    for attr in exported:
        assert getattr(module, attr) is not None, attr


def test_top_level_reexports_are_the_same_objects() -> None:
    from apimw import etag, idempotency, microversion

    assert apimw.MicroversionMiddleware is microversion.MicroversionMiddleware
    assert apimw.ETagMiddleware is etag.ETagMiddleware
    assert apimw.IdempotencyMiddleware is idempotency.IdempotencyMiddleware


def test_importing_apimw_does_not_import_optional_backends() -> None:
    import subprocess
    import sys

    code = (
        "import sys, apimw; "
        "bad = [m for m in ('redis', 'pymemcache', 'flask', 'oslo_config', 'sqlalchemy', 'requests', "
        "'prometheus_client', 'opentelemetry') "
        "if m in sys.modules]; print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_oslo_list_opts_covers_every_middleware() -> None:
    from apimw._opts import list_opts

    groups = dict(list_opts())
    assert set(groups) == {"apimw_microversion", "apimw_etag", "apimw_idempotency"}


@pytest.mark.parametrize("name", ["microversion", "etag", "idempotency"])
def test_paste_entry_points_resolve_to_filter_factories(name: str) -> None:
    (ep,) = [e for e in entry_points(group="paste.filter_factory") if e.name == name and e.dist
             and e.dist.name == "apimw"]  # fmt: skip
    factory = ep.load()
    assert callable(factory)


def test_oslo_opts_list_is_available_lazily() -> None:
    from apimw import microversion

    names = {opt.name for opt in microversion.OPTS}
    assert {"service_type", "min_version", "max_version", "pin_max_version"} <= names


def test_importing_apimw_imports_no_middleware_until_a_name_is_used() -> None:
    """``import apimw`` stays cheap: the re-exported names are imported on first use."""
    import subprocess
    import sys

    code = (
        "import sys, apimw; before = sorted(m for m in sys.modules if m.startswith('apimw.')); "
        "apimw.ETagMiddleware; after = 'apimw.etag' in sys.modules; print(before, after)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] True"


def test_the_top_level_names_are_listed_by_dir() -> None:
    assert set(apimw.__all__) <= set(dir(apimw))
