"""``/v1/drivers/...`` as real Ironic 39.0 answers it (fake-hardware; redfish where enabled).

Ironic's source: ironic/api/controllers/v1/driver.py (``hide_fields_in_newer_versions``:
storage 1.33, rescue 1.38, bios 1.40, firmware 1.86; ``DriverRaidController`` at 1.12;
``properties`` = every default interface's properties), ironic/drivers/modules/fake.py and
ironic/common/raid.py (the logical disk properties), compared side by side with Ironic 39.0.
"""

from __future__ import annotations

from .conftest import Api

ALWAYS = ("boot", "console", "deploy", "inspect", "management", "network", "power", "raid", "vendor")
GATED = {"storage": "1.33", "rescue": "1.38", "bios": "1.40", "firmware": "1.86"}

#: Ironic 39.0's fake-hardware defaults (GET /v1/drivers/fake-hardware at 1.115).
IRONIC_FAKE_DEFAULTS = {
    "bios": "fake", "boot": "fake", "console": "fake", "deploy": "fake", "firmware": "fake",
    "inspect": "fake", "management": "fake", "network": "noop", "power": "fake", "raid": "fake",
    "rescue": "fake", "storage": "noop", "vendor": "fake",
}  # fmt: skip


def test_driver_shows_every_interface_at_the_latest_version(api: Api) -> None:
    doc = api.get("/v1/drivers/fake-hardware", version="1.115").json()
    for kind, default in IRONIC_FAKE_DEFAULTS.items():
        assert doc[f"default_{kind}_interface"] == default, kind
        assert default in doc[f"enabled_{kind}_interfaces"], kind
    # the interfaces a node may switch off are enabled too, as in Ironic's fake-hardware
    for kind in ("bios", "console", "firmware", "raid", "rescue", "vendor"):
        assert f"no-{kind}" in doc[f"enabled_{kind}_interfaces"]


def test_driver_interface_fields_appear_at_ironics_versions(api: Api) -> None:
    for kind, since in GATED.items():
        major, minor = since.split(".")
        below = f"{major}.{int(minor) - 1}"
        assert f"default_{kind}_interface" not in api.get("/v1/drivers/fake-hardware", version=below).json()
        doc = api.get("/v1/drivers/fake-hardware", version=since).json()
        assert doc[f"default_{kind}_interface"] == IRONIC_FAKE_DEFAULTS[kind]
        assert f"enabled_{kind}_interfaces" in doc
    at_130 = api.get("/v1/drivers/fake-hardware", version="1.30").json()
    for kind in ALWAYS:
        assert f"default_{kind}_interface" in at_130, kind
    # the list with detail shows the same fields
    listed = api.get("/v1/drivers?detail=true", version="1.115").json()["drivers"]
    fake = next(d for d in listed if d["name"] == "fake-hardware")
    assert fake["default_firmware_interface"] == "fake"
    assert fake["default_vendor_interface"] == "fake"


def test_driver_properties_come_from_its_interfaces(api: Api) -> None:
    # Ironic 39.0, fake-hardware: the fake vendor interface's two properties
    props = api.get("/v1/drivers/fake-hardware/properties").json()
    assert props == {"B1": "B1 description. Required.", "B2": "B2 description. Required."}
    # a fake node still validates without them (they are vendor-method arguments)
    node = api.node()
    assert api.get(f"/v1/nodes/{node['uuid']}/validate").json()["power"] == {"result": True}
    assert api.get("/v1/drivers/no-such/properties").status_code == 404


def test_raid_logical_disk_properties(api: Api) -> None:
    resp = api.get("/v1/drivers/fake-hardware/raid/logical_disk_properties")
    assert resp.status_code == 200, resp.text
    props = resp.json()
    assert set(props) == {
        "raid_level", "size_gb", "volume_name", "is_root_volume", "share_physical_disks",
        "disk_type", "interface_type", "number_of_physical_disks", "controller", "physical_disks",
    }  # fmt: skip
    assert props["raid_level"].startswith("RAID level for the logical disk.")
    assert props["raid_level"].endswith("Required.")
    # Ironic: 406 below 1.12, 404 for an unknown driver
    old = api.get("/v1/drivers/fake-hardware/raid/logical_disk_properties", version="1.11")
    assert old.status_code == 406
    assert api.get("/v1/drivers/no-such/raid/logical_disk_properties").status_code == 404
