"""docs/conformance/etag.md: every row names a test, and every test it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "conformance" / "etag.md"
NODE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def test_every_row_of_the_conformance_table_names_a_test_that_exists() -> None:
    rows = [line for line in PAGE.read_text(encoding="utf-8").splitlines()
            if line.startswith("|") and not line.startswith(("|---", "| RFC", "| Standard"))]  # fmt: skip
    assert len(rows) >= 25
    for row in rows:
        nodes = NODE.findall(row)
        assert nodes, f"a row without a test: {row[:80]}"
        for path, name in nodes:
            source = (ROOT / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {name}\(", source, re.MULTILINE), f"{path}::{name} does not exist"
