"""docs/conformance/microversion.md names, on each row, tests that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "conformance" / "microversion.md"


def test_every_row_names_a_test_that_exists() -> None:
    rows = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    rows = [row for row in rows if not row.startswith(("| #", "| the guideline"))]
    assert len(rows) >= 20
    for row in rows:
        named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+)[^`]*)?`", row)
        assert named, row
        for path, function in named:
            source = ROOT / path
            assert source.is_file(), path
            if function:
                tree = ast.parse(source.read_text(encoding="utf-8"))
                defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
                assert function in defined, f"{path}::{function}"
