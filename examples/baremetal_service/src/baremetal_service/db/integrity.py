"""Database constraint violations as the API's errors (409 for a duplicate, 400 otherwise).

A write that breaks a unique constraint is answered as Ironic answers it (``NodeNameExists``,
``MACAlreadyExists``...), found from the constraint's name on either backend; a NOT NULL
violation names the field the client left out.  Never the driver's own text: it quotes SQL,
table names and sometimes the input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn

import sqlalchemy as sa

from baremetal_service import exceptions as exc

__all__ = ["DATA_ERROR", "raise_integrity"]

#: Which unique constraint -> which 409.
_DUPLICATES: Final[dict[tuple[str, str], Callable[[Any], exc.BaremetalError]]] = {
    ("nodes", "uuid"): exc.NodeUuidExists,
    ("nodes", "name"): exc.NodeNameExists,
    ("nodes", "instance_uuid"): lambda v: exc.InstanceAssociated(v, "(new)"),
    ("ports", "uuid"): exc.PortUuidExists,
    ("ports", "address"): exc.MACAlreadyExists,
    ("ports", "name"): exc.PortNameExists,
    ("portgroups", "uuid"): exc.PortgroupUuidExists,
    ("portgroups", "name"): exc.PortgroupNameExists,
    ("portgroups", "address"): exc.PortgroupMACExists,
    ("chassis", "uuid"): exc.ChassisUuidExists,
    ("resource_classes", "name"): exc.ResourceClassExists,
    ("allocations", "uuid"): exc.AllocationDuplicate,
    ("allocations", "name"): exc.AllocationDuplicate,
    ("allocations", "node_id"): exc.AllocationNodeTaken,
    ("deploy_templates", "uuid"): exc.DeployTemplateDuplicate,
    ("deploy_templates", "name"): exc.DeployTemplateDuplicate,
    ("runbooks", "uuid"): exc.RunbookDuplicate,
    ("runbooks", "name"): exc.RunbookDuplicate,
    ("volume_connectors", "uuid"): exc.VolumeConnectorUuidExists,
    ("volume_connectors", "type"): exc.VolumeConnectorTypeAndIdExists,  # (type, connector_id)
    ("volume_targets", "uuid"): exc.VolumeTargetUuidExists,
    ("volume_targets", "boot_index"): exc.VolumeTargetBootIndexExists,  # (boot_index, node_id)
    ("inspection_rules", "uuid"): exc.InspectionRuleUuidExists,
}
#: Unique constraints over several columns whose 409 names them all: built from the document.
_DUPLICATE_DOCS: Final = frozenset({("volume_connectors", "type")})


def _unique_violation(error: sa.exc.IntegrityError) -> tuple[str, str] | None:
    """``(table, column)`` of the unique constraint *error* is about, on either backend."""
    text = str(error.orig)
    for table, column in _DUPLICATES:
        if f"uniq_{table}0{column}" in text or f"{table}.{column}" in text:
            return table, column
    return None


#: Reference columns -> the API field a client sets (a NOT NULL violation names the column).
_FIELD_OF_COLUMN: Final = {
    "node_id": "node_uuid",
    "chassis_id": "chassis_uuid",
    "portgroup_id": "portgroup_uuid",
}
DATA_ERROR: Final = "a value does not fit its database column (wrong type, out of range or too long)."
_NOT_NULL = (
    re.compile(r"NOT NULL constraint failed: \w+\.(\w+)"),  # SQLite
    re.compile(r'null value in column "(\w+)"'),  # PostgreSQL
)


def _not_null_violation(error: sa.exc.IntegrityError) -> str | None:
    """The column of the NOT NULL constraint *error* is about, on either backend."""
    text = str(error.orig)
    for pattern in _NOT_NULL:
        found = pattern.search(text)
        if found:
            return found.group(1)
    return None


def raise_integrity(kind: str, error: sa.exc.IntegrityError, values: Mapping[str, Any]) -> NoReturn:
    """The API error of *error*, raised by a write of a *kind* with these *values*."""
    found = _unique_violation(error)
    if found is not None:
        table, column = found
        value = values.get(column)
        if (table, column) == ("nodes", "instance_uuid"):
            raise exc.InstanceAssociated(str(value), str(values.get("uuid"))) from None
        raise _DUPLICATES[found](values if found in _DUPLICATE_DOCS else value) from None
    if kind == "chassis":
        raise exc.ChassisNotEmpty(str(values.get("uuid"))) from None
    if kind == "portgroup":
        raise exc.PortgroupNotEmpty(str(values.get("uuid"))) from None
    column = _not_null_violation(error)
    if column is not None:
        field = _FIELD_OF_COLUMN.get(column, column)
        raise exc.InvalidParameterValue(
            f"Missing mandatory field {field!r} of a {kind}: it cannot be removed or null.",
            field=field,
        ) from None
    # Never the driver's text: it quotes SQL, table names and sometimes the input.
    raise exc.InvalidParameterValue(f"Invalid {kind}: the values break a database constraint.") from None
