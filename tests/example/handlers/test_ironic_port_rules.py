"""Port rules over HTTP, as Ironic 39.0 answers them: a port is named by its UUID or a
logical name (a MAC address or a malformed identifier is a 400), and a port in a port group
is on the port group's physical network."""

from __future__ import annotations

import pytest

from .conftest import Api, error_of

MAC = "52:54:00:12:34:56"


@pytest.mark.parametrize("ident", [MAC, "malformed:id", "a b", "ab$"])
def test_a_port_identifier_is_a_uuid_or_a_name(api: Api, ident: str) -> None:
    node = api.node()
    assert api.post("/v1/ports", {"node_uuid": node["uuid"], "address": MAC}).status_code == 201
    patch = [{"op": "add", "path": "/extra/a", "value": "b"}]
    for resp in (api.get(f"/v1/ports/{ident}"), api.patch(f"/v1/ports/{ident}", patch),
                 api.delete(f"/v1/ports/{ident}")):  # fmt: skip
        assert resp.status_code == 400, resp.text
        assert error_of(resp)["faultstring"] == f"Expected UUID or name for port_ident: {ident}"
    assert api.get("/v1/ports/no-such-port").status_code == 404
    assert len(api.get("/v1/ports").json()["ports"]) == 1


def test_a_port_joins_a_port_group_only_on_its_physical_network(api: Api) -> None:
    node = api.node()
    group = api.post("/v1/portgroups", {"node_uuid": node["uuid"], "physical_network": "physnet1"}).json()
    port = {"node_uuid": node["uuid"], "portgroup_uuid": group["uuid"]}
    for physnet in ("physnet2", None):
        refused = api.post("/v1/ports", {**port, "address": "52:54:00:aa:00:02", "physical_network": physnet})
        assert refused.status_code == 409, refused.text
        assert error_of(refused)["faultstring"] == (
            f"Port with physical network {physnet} cannot become a member of port group "
            f"{group['uuid']} which has ports in physical network physnet1."
        )
    member = api.post("/v1/ports", {**port, "address": "52:54:00:aa:00:03", "physical_network": "physnet1"})
    assert member.status_code == 201, member.text
    # an update that would leave the group's network, or bring another port in, is refused too
    moved = api.patch(f"/v1/ports/{member.json()['uuid']}", [
        {"op": "replace", "path": "/physical_network", "value": "physnet2"},
    ])  # fmt: skip
    assert moved.status_code == 409, moved.text
    stray = api.post(
        "/v1/ports", {"node_uuid": node["uuid"], "address": MAC, "physical_network": "physnet3"}
    )
    joined = api.patch(f"/v1/ports/{stray.json()['uuid']}", [
        {"op": "add", "path": "/portgroup_uuid", "value": group["uuid"]},
    ])  # fmt: skip
    assert joined.status_code == 409, joined.text
    # a group without a network of its own takes its first port's
    plain = api.post("/v1/portgroups", {"node_uuid": node["uuid"]}).json()
    first = {"node_uuid": node["uuid"], "portgroup_uuid": plain["uuid"], "physical_network": "physnet4"}
    assert api.post("/v1/ports", {**first, "address": "52:54:00:aa:00:04"}).status_code == 201
    assert api.post("/v1/ports", {**first, "address": "52:54:00:aa:00:05"}).status_code == 201
    other = {**first, "physical_network": "physnet5", "address": "52:54:00:aa:00:06"}
    assert api.post("/v1/ports", other).status_code == 409
