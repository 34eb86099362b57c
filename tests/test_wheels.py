"""What users install is what we test: the built wheels hold every module of the source
trees, import in a clean interpreter, and (under scripts/test) are what the suite imports.

scripts/test builds the wheels and sets ``APIMW_TEST_WHEELS``; run alone, these tests build
them into a temporary directory themselves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group(__name__)  # module fixtures set up once

REPO = Path(__file__).resolve().parents[1]
DISTS = {
    # distribution file prefix -> (project folder, its package's folder)
    "apimw": (REPO, REPO / "apimw"),
    "baremetal_service": (REPO / "examples" / "baremetal_service",
                          REPO / "examples" / "baremetal_service" / "src" / "baremetal_service"),
}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = os.environ.get("APIMW_TEST_WHEELS")
    if where:
        folder = Path(where)
    else:
        folder = tmp_path_factory.mktemp("wheels")
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
             str(folder), *(str(project) for project, _ in DISTS.values())],
            check=True, capture_output=True,
        )
    found = {}
    for prefix in DISTS:
        (whl,) = folder.glob(f"{prefix}-*.whl")
        found[prefix] = whl
    return found


@pytest.mark.parametrize("dist", sorted(DISTS))
def test_wheel_holds_every_file_of_the_source_tree(wheels: dict[str, Path], dist: str) -> None:
    _, package = DISTS[dist]
    tracked = subprocess.run(["git", "ls-files", "-z", str(package)], cwd=REPO, capture_output=True,
                             check=True).stdout.decode().split("\0")
    source = {str(Path(REPO, name).relative_to(package.parent)) for name in tracked if name}
    assert source, f"no tracked files under {package}"
    inside = set(zipfile.ZipFile(wheels[dist]).namelist())
    assert sorted(source - inside) == []


def test_library_wheel_holds_only_the_library(wheels: dict[str, Path]) -> None:
    names = zipfile.ZipFile(wheels["apimw"]).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"apimw", next(t for t in tops if t.endswith(".dist-info"))}
    entry_points = zipfile.ZipFile(wheels["apimw"]).read(
        next(n for n in names if n.endswith("dist-info/entry_points.txt"))).decode()
    assert "baremetal" not in entry_points and "console_scripts" not in entry_points


def test_installed_wheel_imports_in_a_fresh_environment(wheels: dict[str, Path], tmp_path: Path) -> None:
    """Every module of the wheel imports from a target directory, with no source tree in reach."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(target), str(wheels["apimw"])], check=True, capture_output=True)
    modules = sorted(
        name[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        for name in zipfile.ZipFile(wheels["apimw"]).namelist() if name.endswith(".py")
    )
    # -I: no user site, no PYTHONPATH, no current directory: only the standard library and target.
    code = (
        "import importlib, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        f"for name in {modules!r}:\n"
        "    try:\n"
        "        module = importlib.import_module(name)\n"
        "    except ImportError as error:\n"
        "        if error.name in {'redis', 'pymemcache', 'sqlalchemy', 'requests', 'oslo_config',\n"
        "                          'flask', 'webob', 'paste'}:\n"
        "            continue  # an optional extra's module, its library not installed\n"
        "        raise\n"
        "    assert module.__file__.startswith(sys.argv[1]), module.__file__\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code, str(target)], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.skipif(not os.environ.get("APIMW_TEST_INSTALLED"), reason="only under scripts/test, which "
                    "installs the wheels non-editable (a developer's editable install is allowed to differ)")
@pytest.mark.parametrize("package", ["apimw", "baremetal_service"])
def test_the_suite_runs_against_the_installed_wheel(package: str) -> None:
    import importlib

    module = importlib.import_module(package)
    location = Path(module.__file__ or "").resolve()
    assert "site-packages" in location.parts, location
    assert REPO not in location.parents or ".venv-test" in location.parts, location


@pytest.mark.skipif(not os.environ.get("APIMW_TEST_INSTALLED"), reason="only under scripts/test, which "
                    "installs the wheels non-editable (a developer's editable install is allowed to differ)")
def test_a_subprocess_started_in_the_repository_imports_the_installed_wheel() -> None:
    """``python -m tests.x`` from the repository root puts the root, and so the source apimw/, first
    on sys.path; importing ``tests`` first moves it behind site-packages."""
    out = subprocess.run([sys.executable, "-c", "import tests, apimw; print(apimw.__file__)"], cwd=REPO,
                         capture_output=True, text=True, check=True)
    location = Path(out.stdout.strip()).resolve()
    assert "site-packages" in location.parts, location
    assert location.parent != REPO / "apimw"
