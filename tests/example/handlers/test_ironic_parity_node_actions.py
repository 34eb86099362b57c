"""Per-node actions Ironic 39.0 serves through the node's interfaces, and ``POST /v1/events``.

Ironic's source: ironic/api/controllers/v1/node.py (IndicatorController, NodeConsoleController,
NodeStatesController.raid, NodeVendorPassthruController), event.py (1.54) and its schema,
ironic/drivers/modules/fake.py (fake-hardware's indicators, console, vendor methods),
ironic/drivers/raid_config_schema.json.  Answers captured side by side from Ironic 39.0
(fake-hardware) are quoted in each test.
"""

from __future__ import annotations

from .conftest import Api, error_of

# -- indicators -------------------------------------------------------------------------------


def test_indicators_of_fake_hardware(api: Api) -> None:
    uuid = api.node()["uuid"]
    resp = api.get(f"/v1/nodes/{uuid}/management/indicators")
    assert resp.status_code == 200, resp.text
    indicators = resp.json()["indicators"]
    base = f"{api.url}/v1/nodes/{uuid}/management/indicators"
    assert indicators == [
        {"name": "led-0@chassis", "component": "chassis", "readonly": True, "states": ["off", "on"],
         "links": [{"href": f"{base}/led-0@chassis", "rel": "self"},
                   {"href": f"{api.url}/nodes/{uuid}/management/indicators/led-0@chassis",
                    "rel": "bookmark"}]},
        {"name": "led@system", "component": "system", "readonly": False,
         "states": ["blinking", "off", "on"],
         "links": [{"href": f"{base}/led@system", "rel": "self"},
                   {"href": f"{api.url}/nodes/{uuid}/management/indicators/led@system",
                    "rel": "bookmark"}]},
    ]  # fmt: skip
    assert api.get(f"{base.removeprefix(api.url)}/led@system").json() == {"state": "on"}
    assert api.get(f"{base.removeprefix(api.url)}/led-0@chassis").json() == {"state": "on"}


def test_indicator_errors_as_ironic(api: Api) -> None:
    uuid = api.node()["uuid"]
    path = f"/v1/nodes/{uuid}/management/indicators"
    bad = api.get(f"{path}/nope@system")
    assert bad.status_code == 400 and error_of(bad)["faultstring"] == "Invalid indicator nope specified."
    malformed = api.get(f"{path}/nope")
    assert malformed.status_code == 400
    assert error_of(malformed)["faultstring"] == 'Malformed indicator name "nope"'
    # fake-hardware cannot set an indicator: Ironic's 400
    put = api.put(f"{path}/led@system", {"state": "blinking"})
    assert put.status_code == 400
    assert error_of(put)["faultstring"] == (
        "Driver fake-hardware does not support set_indicator_state (disabled or not implemented)."
    )
    assert api.get("/v1/nodes/no-such/management/indicators").status_code == 404


# -- console ----------------------------------------------------------------------------------


def test_console_enable_and_disable(api: Api) -> None:
    uuid = api.node()["uuid"]
    resp = api.put(f"/v1/nodes/{uuid}/states/console", {"enabled": True})
    assert resp.status_code == 202, resp.text
    assert resp.headers["Location"].endswith(f"/v1/nodes/{uuid}/states/console")
    # Ironic's fake console: console_info {} while enabled
    assert api.get(f"/v1/nodes/{uuid}/states/console").json() == {
        "console_enabled": True,
        "console_info": {},
    }
    assert api.get(f"/v1/nodes/{uuid}").json()["console_enabled"] is True
    assert api.put(f"/v1/nodes/{uuid}/states/console", {"enabled": "false"}).status_code == 202
    assert api.get(f"/v1/nodes/{uuid}/states/console").json() == {
        "console_enabled": False,
        "console_info": None,
    }


def test_console_bad_input_and_no_console(api: Api) -> None:
    uuid = api.node()["uuid"]
    missing = api.put(f"/v1/nodes/{uuid}/states/console", {})
    assert missing.status_code == 400
    assert error_of(missing)["faultstring"] == "Missing mandatory parameter: enabled"
    maybe = api.put(f"/v1/nodes/{uuid}/states/console", {"enabled": "maybe"})
    assert maybe.status_code == 400
    assert error_of(maybe)["faultstring"].startswith("Invalid enabled: Unrecognized value 'maybe'")
    plain = api.node(console_interface="no-console")["uuid"]
    resp = api.put(f"/v1/nodes/{plain}/states/console", {"enabled": True})
    assert resp.status_code == 400
    assert error_of(resp)["faultstring"] == (
        "Driver fake-hardware does not support console (disabled or not implemented)."
    )


# -- RAID -------------------------------------------------------------------------------------


def test_target_raid_config_is_validated_and_stored(api: Api) -> None:
    uuid = api.node()["uuid"]
    config = {"logical_disks": [{"size_gb": 100, "raid_level": "1"}]}
    resp = api.put(f"/v1/nodes/{uuid}/states/raid", config)
    assert resp.status_code == 204, resp.text
    assert api.get(f"/v1/nodes/{uuid}").json()["target_raid_config"] == config
    # an empty document clears it (Ironic validates only a non-empty one)
    assert api.put(f"/v1/nodes/{uuid}/states/raid", {}).status_code == 204
    assert api.get(f"/v1/nodes/{uuid}").json()["target_raid_config"] == {}


def test_raid_config_errors_as_ironic(api: Api) -> None:
    uuid = api.node()["uuid"]
    path = f"/v1/nodes/{uuid}/states/raid"
    level = api.put(path, {"logical_disks": [{"size_gb": 100, "raid_level": "7"}]})
    assert level.status_code == 400
    assert error_of(level)["faultstring"] == (
        "RAID config validation error: '7' is not one of "
        "['JBOD', '0', '1', '2', '5', '6', '1+0', '5+0', '6+0']"
    )
    empty = api.put(path, {"logical_disks": []})
    assert error_of(empty)["faultstring"] == "RAID config validation error: [] should be non-empty"
    extra = api.put(path, {"logical_disks": [{"size_gb": "MAX", "raid_level": "1", "bogus": 1}]})
    assert extra.status_code == 400
    roots = api.put(path, {"logical_disks": [
        {"size_gb": "MAX", "raid_level": "1", "is_root_volume": True},
        {"size_gb": 10, "raid_level": "0", "is_root_volume": True},
    ]})  # fmt: skip
    assert roots.status_code == 400
    assert error_of(roots)["faultstring"] == (
        "Raid config cannot have more than one root volume. 2 root volumes were specified"
    )
    assert api.put(path, [1]).status_code == 400
    old = api.put(path, {"logical_disks": [{"size_gb": 1, "raid_level": "1"}]}, version="1.11")
    assert old.status_code == 406
    no_raid = api.node(raid_interface="no-raid")["uuid"]
    resp = api.put(f"/v1/nodes/{no_raid}/states/raid", {"logical_disks": [{"size_gb": 1, "raid_level": "1"}]})
    assert resp.status_code == 404
    assert error_of(resp)["faultstring"] == (
        "Driver fake-hardware does not support raid (disabled or not implemented)."
    )
    assert api.get(f"/v1/nodes/{uuid}").json()["target_raid_config"] == {}


def test_target_raid_config_is_not_a_state_to_put(api: Api) -> None:
    """Ironic 39: ``PUT .../states/target_raid_config`` (and any other unknown state) is 405."""
    uuid = api.node()["uuid"]
    for name in ("target_raid_config", "nope"):
        resp = api.put(f"/v1/nodes/{uuid}/states/{name}", {"target": {"raid": "config"}})
        assert resp.status_code == 405, (name, resp.text)


# -- boot mode and secure boot (1.76) ---------------------------------------------------------


def test_boot_mode_and_secure_boot_are_accepted_and_fake_hardware_records_why_not(api: Api) -> None:
    """Ironic 39 (fake-hardware): 202 with the states link; the conductor cannot change either
    on fake hardware and says so in ``last_error``; the node's ``boot_mode`` stays null."""
    uuid = api.node()["uuid"]
    resp = api.put(f"/v1/nodes/{uuid}/states/boot_mode", {"target": "uefi"})
    assert resp.status_code == 202, resp.text
    assert resp.headers["Location"].endswith(f"/v1/nodes/{uuid}/states")
    node = api.get(f"/v1/nodes/{uuid}").json()
    assert node["boot_mode"] is None
    assert node["last_error"] == (
        "Failed to change boot mode to 'uefi: Driver fake-hardware does not support set_boot_mode "
        "(disabled or not implemented)."
    )
    resp = api.put(f"/v1/nodes/{uuid}/states/secure_boot", {"target": "true"})
    assert resp.status_code == 202, resp.text
    node = api.get(f"/v1/nodes/{uuid}").json()
    assert node["secure_boot"] is None
    assert node["last_error"] == (
        "Failed to change secure_boot state to 'True': Driver fake-hardware does not support "
        "set_secure_boot_state (disabled or not implemented)."
    )


def test_boot_mode_and_secure_boot_errors_as_ironic(api: Api) -> None:
    uuid = api.node()["uuid"]
    mode = api.put(f"/v1/nodes/{uuid}/states/boot_mode", {"target": "foo"})
    assert mode.status_code == 400
    assert error_of(mode)["faultstring"] == (
        "Invalid boot mode foo requested for node. Allowed boot modes are: bios, uefi"
    )
    secure = api.put(f"/v1/nodes/{uuid}/states/secure_boot", {"target": "maybe"})
    assert secure.status_code == 400
    assert error_of(secure)["faultstring"] == (
        "Invalid target: Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', 'false', "
        "'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"
    )
    missing = api.put(f"/v1/nodes/{uuid}/states/secure_boot", {})
    assert missing.status_code == 400
    assert error_of(missing)["faultstring"] == "Missing mandatory parameter: target"
    old = api.put(f"/v1/nodes/{uuid}/states/boot_mode", {"target": "uefi"}, version="1.75")
    assert old.status_code == 404
    assert error_of(old)["faultstring"] == "This endpoint is supported starting with the API version 1.76"
    assert api.put("/v1/nodes/no-such/states/boot_mode", {"target": "uefi"}).status_code == 404
    assert api.get(f"/v1/nodes/{uuid}").json()["last_error"] is None


# -- vendor passthru --------------------------------------------------------------------------


def test_vendor_passthru_methods_and_calls(api: Api) -> None:
    uuid = api.node()["uuid"]
    methods = api.get(f"/v1/nodes/{uuid}/vendor_passthru/methods")
    assert methods.status_code == 200, methods.text
    assert methods.json() == {
        "fourth_method_shared_lock": {"http_methods": ["POST"], "async": True,
                                      "description": "Test if the value of bar is woof",
                                      "attach": False, "require_exclusive_lock": False},
        "log_passthrough": {"http_methods": ["POST"], "async": True,
                            "description": "Test pass-through to wait.", "attach": False,
                            "require_exclusive_lock": True},
        "second_method": {"http_methods": ["POST"], "async": True,
                          "description": "Test if the value of bar is kazoo", "attach": False,
                          "require_exclusive_lock": True},
        "third_method_sync": {"http_methods": ["POST"], "async": False,
                              "description": "Test if the value of bar is meow", "attach": False,
                              "require_exclusive_lock": True},
    }  # fmt: skip
    path = f"/v1/nodes/{uuid}/vendor_passthru"
    sync = api.post(f"{path}?method=third_method_sync", {"bar": "meow"})
    assert sync.status_code == 200 and sync.json() is True
    assert api.post(f"{path}?method=third_method_sync", {"bar": "x"}).json() is False
    queued = api.post(f"{path}?method=second_method", {"bar": "kazoo"})
    assert queued.status_code == 202 and queued.content == b""
    missing = api.post(f"{path}?method=third_method_sync", {})
    assert error_of(missing)["faultstring"] == "Parameter 'bar' not passed to method 'third_method_sync'."
    unknown = api.post(f"{path}?method=nope", {})
    assert unknown.status_code == 400 and error_of(unknown)["faultstring"] == "No handler for method nope"
    get = api.get(f"{path}?method=second_method")
    assert error_of(get)["faultstring"] == "The method second_method does not support HTTP GET"
    no_method = api.post(path, {})
    assert no_method.status_code == 400
    assert error_of(no_method)["faultstring"] == "Missing mandatory parameter: method"
    plain = api.node(vendor_interface="no-vendor")["uuid"]
    resp = api.post(f"/v1/nodes/{plain}/vendor_passthru?method=second_method", {"bar": "kazoo"})
    assert resp.status_code == 400


# -- events -----------------------------------------------------------------------------------

_EVENT = {
    "event": "network.bind_port",
    "port_id": "11111111-1111-1111-1111-111111111111",
    "mac_address": "52:54:00:00:00:01",
    "status": "ACTIVE",
}


def test_events_are_accepted_at_1_54(api: Api) -> None:
    resp = api.post("/v1/events", {"events": [_EVENT]})
    assert resp.status_code == 204, resp.text
    old = api.post("/v1/events", {"events": [_EVENT]}, version="1.53")
    assert old.status_code == 404
    assert "events" in api.get("/v1/", version="1.54").json()
    assert "events" not in api.get("/v1/", version="1.53").json()


def test_events_schema_as_ironic(api: Api) -> None:
    def fault(body: object) -> str:
        resp = api.post("/v1/events", body)
        assert resp.status_code == 400, resp.text
        return error_of(resp)["faultstring"]

    assert fault({"events": []}) == "Schema error: [] should be non-empty"
    assert fault({}) == "Schema error: 'events' is a required property"
    assert fault({"events": [{"event": "network.bind_port"}]}) == (
        "Schema error: 'port_id' is a required property"
    )
    assert fault({"events": [{**_EVENT, "event": "bogus.thing"}]}) == (
        "Schema error: 'bogus.thing' is not one of "
        "['network.bind_port', 'network.unbind_port', 'network.delete_port']"
    )
    assert fault({"events": [{**_EVENT, "binding:host_id": "h"}]}) == "Schema error: 'h' is not a 'uuid'"
    assert api.get("/v1/events").status_code == 405
