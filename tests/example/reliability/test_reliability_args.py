"""``python -m bench.reliability`` writes out of the way unless told to publish: a first run
must not overwrite the committed docs/example/reliability.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.reliability import SCENARIOS
from bench.reliability.__main__ import DEFAULT_OUT, PUBLISHED, REPO, parse_args


def test_a_plain_run_writes_under_build_not_docs() -> None:
    args = parse_args([])
    assert args.out == DEFAULT_OUT == REPO / "build" / "reliability"
    assert PUBLISHED not in (args.out, *args.out.parents)
    assert args.names == list(SCENARIOS)
    assert parse_args(["--quick", "--only", "soak"]).out == DEFAULT_OUT


def test_publish_writes_the_committed_report() -> None:
    assert parse_args(["--publish"]).out == REPO / "docs" / "example"


def test_out_chooses_the_directory(tmp_path: Path) -> None:
    assert parse_args(["--out", str(tmp_path)]).out == tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--out", str(REPO / "docs" / "example")], id="out-docs"),
        pytest.param(["--out", "x", "--publish"], id="out-and-publish"),
        pytest.param(["--only", "nonesuch"], id="unknown-scenario"),
    ],
)
def test_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        parse_args(argv)
    assert done.value.code == 2
    assert "python -m bench.reliability" in capsys.readouterr().err
