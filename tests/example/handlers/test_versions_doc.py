"""The microversion history in docs/example/baremetal-service.md matches the code, one line per version."""

from __future__ import annotations

from pathlib import Path

from baremetal_service import versions
from baremetal_service.deploy import MICROVERSION_OPTIONS
from baremetal_service.objects.nodes import NODE_FIELDS

DOC = Path(__file__).resolve().parents[3] / "docs" / "example" / "baremetal-service.md"


def test_every_version_has_one_line_in_the_docs() -> None:
    text = DOC.read_text()
    for version, line in versions.HISTORY:
        assert f"- **{version}** — {line}" in text, version
    listed = [v for v, _ in versions.HISTORY]
    assert listed == sorted(listed) and len(set(listed)) == len(listed)


def test_history_ends_at_the_served_maximum_with_our_features_above_ironic() -> None:
    assert versions.HISTORY[-1][0] == versions.MAX_VERSION
    assert MICROVERSION_OPTIONS["max_version"] == str(versions.MAX_VERSION)
    assert versions.IRONIC_MAX_VERSION < versions.ETAG_VERSION < versions.RESOURCE_CLASS_VERSION
    # Ironic's own numbers for these fields.
    assert NODE_FIELDS.since("name") == versions.NODE_NAME == (1, 5)
    assert NODE_FIELDS.since("description") == (1, 51)
    assert NODE_FIELDS.since("resource_class") == (1, 21)
    assert NODE_FIELDS.since("driver_internal_info") == (1, 3)
