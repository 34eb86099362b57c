"""The public surface stays honest: sorted, importable __all__, resolvable entry points."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email import message_from_bytes
from email.message import Message
from importlib.metadata import entry_points
from pathlib import Path

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


# -- the release: what a package index receives ---------------------------------------------------

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """apimw's sdist and the wheel built from it (``python -m build``, as a release is made), and
    the build's output."""
    out = tmp_path_factory.mktemp("dist")
    # from a copy of the checkout without its build outputs: a build writes its
    # egg-info and build/ folders into the tree, where another build of the suite may be
    # writing at the same time
    source = tmp_path_factory.mktemp("source") / "apimw"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache",
    ))  # fmt: skip
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    return out, built.stdout + built.stderr


def test_the_build_gives_no_deprecation_warning(release: tuple[Path, str]) -> None:
    _, log = release
    assert "Deprecat" not in log, log


def test_twine_check_passes_on_the_sdist_and_the_wheel(release: tuple[Path, str]) -> None:
    folder, _ = release
    dists = sorted(str(p) for p in folder.iterdir())
    assert sorted(Path(d).suffix for d in dists) == [".gz", ".whl"]
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *dists],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _wheel_metadata(folder: Path) -> Message:
    (wheel,) = folder.glob("apimw-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return message_from_bytes(archive.read(name))


def test_the_metadata_names_the_licence_the_authors_and_the_classifiers(release: tuple[Path, str]) -> None:
    folder, _ = release
    meta = _wheel_metadata(folder)
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["Author"] or meta["Author-email"]
    classifiers = meta.get_all("Classifier") or []
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers)  # the SPDX expression says it
    (wheel,) = folder.glob("apimw-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        licence = next(n for n in archive.namelist() if n.endswith("/licenses/LICENSE"))
        assert b"Apache License" in archive.read(licence) and b"Version 2.0" in archive.read(licence)


def test_the_long_description_has_no_relative_link(release: tuple[Path, str]) -> None:
    """A package index shows the description away from the repository: a link to ``docs/etag.md``
    would lead nowhere there."""
    folder, _ = release
    description = _wheel_metadata(folder).get_payload()
    assert isinstance(description, str) and "apimw" in description
    targets = re.findall(r"\]\(([^)\s]+)\)", description)
    assert [t for t in targets if not t.startswith(("https://", "http://", "#"))] == []


def test_the_sdist_holds_the_licence_the_changelog_and_the_docs(release: tuple[Path, str]) -> None:
    folder, _ = release
    (sdist,) = folder.glob("apimw-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    guides = {str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")}
    wanted = {"LICENSE", "README.md", "CHANGES.md", "docs/reference/conf.py", "docs/reference/index.rst"}
    assert sorted((wanted | guides) - names) == []
    assert not any(name.startswith(("tests/", "examples/", "bench/")) for name in names)


def test_version_is_the_installed_distributions() -> None:
    from importlib.metadata import version

    assert "__version__" in apimw.__all__
    assert apimw.__version__ == version("apimw")


@pytest.mark.parametrize("name", [*MODULES, "apimw.asgi", "apimw.client_resources", "apimw.idempotency_db"])
def test_every_public_module_has_a_page_in_the_api_reference(name: str) -> None:
    page = "apimw" if name == "apimw" else name.removeprefix("apimw.")
    source = (REPO / "docs" / "reference" / f"{page}.rst").read_text()
    assert f".. automodule:: {name}\n" in source
    assert f"\n   {page}\n" in (REPO / "docs" / "reference" / "index.rst").read_text()
