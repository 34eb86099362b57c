"""Request-body validation: jsonschema against fastjsonschema on the service's own schemas.

    PYTHONPATH=examples/baremetal_service/src:. python bench/bench_validation.py [--number 20000]

The accept decision on valid bodies (what every successful write pays): a node create
body (``schemas.NODE_CREATE``), a JSON patch (``schemas.PATCH``) and a whole patched node
(``schemas.NODE_PATCHED``, which a PATCH validates after applying the patch).  jsonschema
runs the service's Draft 2020-12 validator with ECMA-262's ``$`` (handlers/json_schema.py),
fastjsonschema the same schemas compiled once as the service compiles them
(handlers/common.py: no defaults filled in, ``format`` an annotation).  The figure is
the best of 5 timings (``bench._timing.per_call_us``, wall clock).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fastjsonschema  # noqa: E402

from baremetal_service import schemas  # noqa: E402
from baremetal_service.handlers.json_schema import Validator, ecma_schema  # noqa: E402
from bench._timing import per_call_us  # noqa: E402

NODE = {
    "driver": "fake-hardware",
    "name": "node-0042",
    "uuid": "5b8c6a1e-2f5d-4a39-9f3e-6a3d3f0c1b7e",
    "resource_class": "baremetal",
    "properties": {"cpus": 8, "memory_mb": 16384, "local_gb": 100, "cpu_arch": "x86_64"},
    "driver_info": {"redfish_address": "https://10.0.0.42", "redfish_username": "admin"},
    "extra": {"rack": "r12"},
    "conductor_group": "",
}
PATCHED = {
    **NODE,
    "description": "rack 12, slot 3",
    "instance_info": {},
    "instance_uuid": None,
    "chassis_uuid": None,
    "maintenance": False,
    "maintenance_reason": None,
    "automated_clean": None,
    "protected": False,
    "protected_reason": None,
    "owner": "b3d5a0d4c1f84bb0a6e1d6b2e0e7c9a1",
    "lessee": None,
    "retired": False,
    "retired_reason": None,
    "network_data": {},
    "shard": None,
    "parent_node": None,
    "disable_power_off": False,
    **{iface: None for iface in schemas.NODE_INTERFACES},
    "power_interface": "fake",
    "management_interface": "fake",
}
PATCH = [
    {"op": "replace", "path": "/name", "value": "node-0043"},
    {"op": "add", "path": "/extra/slot", "value": 3},
]

CASES: dict[str, tuple[dict[str, Any], Any]] = {
    "node create body": (schemas.NODE_CREATE, NODE),
    "JSON patch (2 ops)": (schemas.PATCH, PATCH),
    "patched node (all fields)": (schemas.NODE_PATCHED, PATCHED),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    print(f"{'schema':28} {'jsonschema':>12} {'fastjsonschema':>15} {'factor':>7}")
    for label, (schema, doc) in CASES.items():
        validator = Validator(schema)
        compiled = fastjsonschema.compile(ecma_schema(schema), use_default=False, use_formats=False)
        assert validator.is_valid(doc)
        compiled(doc)
        slow = per_call_us(lambda v=validator, d=doc: v.is_valid(d), number=args.number, repeat=5)
        fast = per_call_us(lambda c=compiled, d=doc: c(d), number=args.number, repeat=5)
        print(f"{label:28} {slow:10.1f}us {fast:13.1f}us {slow / fast:6.1f}x")


if __name__ == "__main__":
    main()
