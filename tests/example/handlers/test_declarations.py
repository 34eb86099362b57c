"""The declared resources: unknown query parameters (Ironic's 400), the registry, and what
the declarations promise (fields, relations, etag rules) against the data layer."""

from __future__ import annotations

import pytest

from baremetal_service.db import api as db_api
from baremetal_service.objects.catalog import declarations
from baremetal_service.objects.service import etag_ignored_fields

from .conftest import Api, error_of

UUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"

#: (list path, item path): every list and get endpoint of the declared resources.
ENDPOINTS = (
    ("/v1/ports", f"/v1/ports/{UUID}"),
    ("/v1/ports/detail", None),
    ("/v1/portgroups", f"/v1/portgroups/{UUID}"),
    ("/v1/portgroups/detail", None),
    ("/v1/chassis", f"/v1/chassis/{UUID}"),
    ("/v1/chassis/detail", None),
    ("/v1/volume/connectors", f"/v1/volume/connectors/{UUID}"),
    ("/v1/volume/targets", f"/v1/volume/targets/{UUID}"),
    ("/v1/deploy_templates", f"/v1/deploy_templates/{UUID}"),
    ("/v1/deploy_templates/detail", None),
    ("/v1/runbooks", f"/v1/runbooks/{UUID}"),
    ("/v1/runbooks/detail", None),
    ("/v1/inspection_rules", f"/v1/inspection_rules/{UUID}"),
    ("/v1/allocations", f"/v1/allocations/{UUID}"),
    ("/v1/conductors", "/v1/conductors/nohost"),
)


@pytest.mark.parametrize(("list_path", "item_path"), ENDPOINTS)
def test_unknown_query_parameters_are_400_like_ironic(
    api: Api, list_path: str, item_path: str | None
) -> None:
    resp = api.get(list_path + "?foo=1&limit=1&bar=2")
    assert resp.status_code == 400, resp.text
    assert error_of(resp) == {
        "faultstring": "Unexpected arguments: foo, bar",
        "code": "request.unexpected-arguments",
    }
    assert api.get(list_path + "?limit=1&sort_dir=asc").status_code == 200
    if item_path is not None:
        # checked before anything else, as Ironic does (the item does not even exist)
        resp = api.get(item_path + "?foo=1")
        assert resp.status_code == 400, resp.text
        assert error_of(resp)["faultstring"] == "Unexpected arguments: foo"
        assert api.get(item_path + "?fields=created_at").status_code == 404


def test_sub_collections_check_their_arguments_first(api: Api) -> None:
    for path in ("/v1/nodes/nope/ports", "/v1/nodes/nope/portgroups", f"/v1/portgroups/{UUID}/ports"):
        resp = api.get(path + "?foo=1")
        assert resp.status_code == 400, (path, resp.text)
        assert error_of(resp)["faultstring"] == "Unexpected arguments: foo"
        assert api.get(path).status_code == 404


def test_filters_ironic_takes_are_not_unexpected(api: Api) -> None:
    node = api.node()
    assert api.get(f"/v1/ports?node={node['uuid']}&address=52:54:00:00:00:01&shard=x").status_code == 200
    assert api.get(f"/v1/ports?node_uuid={node['uuid']}&portgroup={UUID}").status_code in (200, 404)
    assert api.get("/v1/allocations?state=active&resource_class=x&owner=p").status_code == 200
    assert api.get("/v1/inspection_rules?phase=main&detail=true").status_code == 200
    assert api.get("/v1/runbooks?project=p").status_code == 200


def test_registry_is_stable_and_complete() -> None:
    kinds = [d.kind for d in declarations()]
    assert kinds == [d.kind for d in declarations()]
    assert set(kinds) == {
        "node", "port", "portgroup", "chassis", "connector", "target", "conductor", "allocation",
        "deploy_template", "runbook", "inspection_rule",
    }  # fmt: skip
    from baremetal_service.handlers.resources import declarations as via_api

    assert via_api() == declarations()


@pytest.mark.parametrize("decl", declarations(), ids=lambda d: d.kind)
def test_declarations_agree_with_the_data_layer(decl: object) -> None:
    from baremetal_service.objects.resource import Resource

    assert isinstance(decl, Resource)
    assert set(decl.list_fields) <= set(decl.fields.names)
    assert set(decl.patchable) <= decl.updatable_fields | {"node_uuid"}
    assert not set(decl.read_only_fields) & decl.creatable_fields
    if decl.kind == "conductor":
        return
    assert decl.store_kind in db_api.KINDS
    # every relation is one the data API resolves (UUID or name -> row id)
    refs = db_api.REFS[decl.store_kind]
    assert {field: kind for field, (_col, kind) in refs.items()} == dict(decl.relations)
    # the etag function ignores what the declaration says
    assert etag_ignored_fields()[decl.store_kind] == decl.etag_ignored
    for name in decl.update_conditions + decl.delete_conditions:
        assert name in db_api.CONDITIONS
    for field in decl.list_filters.values():
        column = field.removesuffix("_uuid") + "_id" if field in decl.relations else field
        assert column in db_api.KINDS[decl.store_kind].columns
