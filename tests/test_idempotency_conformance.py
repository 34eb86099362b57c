"""docs/conformance/idempotency.md names a test on every row: each one exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "conformance" / "idempotency.md"


def _tests_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_row_names_tests_that_exist() -> None:
    text = TABLE.read_text()
    # every table row but the headers (their last column is "Proved by")
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.endswith("Proved by |")]
    named: list[tuple[str, str]] = []
    for row in rows:
        found = re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`|`::(test_\w+)`", row)
        assert found, f"a row without a test: {row[:80]}"
        current = ""
        for path, name, short in found:
            current = path or current
            named.append((current, name or short))
    for path, name in named:
        assert name in _tests_of(ROOT / path), f"{path}::{name} does not exist"
    assert len(named) >= 30
