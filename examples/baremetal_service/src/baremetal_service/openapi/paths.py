"""The operations no resource declaration states: discovery and this document, drivers, the
volume index, conductors, shards, events, resource classes and runbook traits."""

from __future__ import annotations

import copy

from baremetal_service import schemas, versions
from baremetal_service.handlers.drivers import RAID_CONFIG
from baremetal_service.handlers.node_management import EVENTS_SCHEMA
from baremetal_service.openapi.builder import Builder
from baremetal_service.openapi.declarations import (
    LINKS,
    OBJECT,
    READ_ERRORS,
    STRINGS,
    TIME,
    WRITE_ERRORS,
)


def discovery_paths(b: Builder) -> None:
    """Discovery, this document, drivers, volume, conductors, shards and events."""
    b.add("/", "get", {
        "tags": ["discovery"], "operationId": "root",
        "responses": b.responses({200: b.response(200, "The API versions", OBJECT)}, (406,)),
    })  # fmt: skip
    b.add("/v1", "get", {
        "tags": ["discovery"], "operationId": "v1",
        "responses": b.responses({200: b.response(200, "The v1 resources", OBJECT)}, (406,)),
    })  # fmt: skip
    b.add("/v1/openapi.json", "get", {
        "tags": ["discovery"], "operationId": "openapi",
        "summary": "This document, for the requested microversion",
        "responses": b.responses({200: b.response(200, "An OpenAPI document", OBJECT)}, (406,)),
    })  # fmt: skip
    named = {"type": "object", "properties": {"links": LINKS}}
    b.add("/v1/drivers", "get", {
        "tags": ["drivers"], "operationId": "list_drivers",
        "responses": b.responses({200: b.response(200, "The drivers", {
            "type": "object", "properties": {"drivers": {"type": "array", "items": named}},
            "required": ["drivers"]})}, READ_ERRORS),
    })  # fmt: skip
    b.add("/v1/drivers/{driver_name}", "get", {
        "tags": ["drivers"], "operationId": "get_driver",
        "responses": b.responses({200: b.response(200, "A driver", named)}, READ_ERRORS),
    })  # fmt: skip
    b.add("/v1/drivers/{driver_name}/properties", "get", {
        "tags": ["drivers"], "operationId": "get_driver_properties",
        "responses": b.responses({200: b.response(200, "Its properties", OBJECT)}, READ_ERRORS),
    })  # fmt: skip
    if b.version >= versions.VOLUME:
        names = ["links", "connectors", "targets"]
        index = {"type": "object", "properties": dict.fromkeys(names, LINKS), "required": names,
                 "additionalProperties": False}  # fmt: skip
        for path, tag, op_id in (("/v1/volume", "volume", "volume_index"),
                                 ("/v1/nodes/{node_ident}/volume", "nodes", "node_volume_index")):
            b.add(path, "get", {
                "tags": [tag], "operationId": op_id,
                "responses": b.responses({200: b.response(200, "Links", index)}, READ_ERRORS),
            }, versions.VOLUME)  # fmt: skip
    conductor = {"type": "object", "properties": {
        "hostname": {"type": "string"}, "conductor_group": {"type": "string"},
        "alive": {"type": "boolean"},
        "drivers": STRINGS, "created_at": TIME, "updated_at": TIME, "links": LINKS},
        "additionalProperties": False}  # fmt: skip
    b.add("/v1/conductors", "get", {
        "tags": ["conductors"], "operationId": "list_conductors",
        "parameters": [b.query("detail", {"type": "boolean"}, versions.DETAIL_QUERY)]
        if b.version >= versions.DETAIL_QUERY else [],
        "responses": b.responses({200: b.response(200, "The conductors", {
            "type": "object", "properties": {"conductors": {"type": "array", "items": conductor},
                                             "next": {"type": "string"}},
            "required": ["conductors"]})}, READ_ERRORS),
    }, versions.CONDUCTORS)  # fmt: skip
    b.add("/v1/conductors/{hostname}", "get", {
        "tags": ["conductors"], "operationId": "get_conductor",
        "responses": b.responses({200: b.response(200, "A conductor", conductor)}, READ_ERRORS),
    }, versions.CONDUCTORS)  # fmt: skip
    b.add("/v1/drivers/{driver_name}/raid/logical_disk_properties", "get", {
        "tags": ["drivers"], "operationId": "get_driver_raid_logical_disk_properties",
        "description": "404 for a driver without a RAID interface.",
        "responses": b.responses({200: b.response(200, "Property names and descriptions", {
            "type": "object", "additionalProperties": {"type": "string"}})}, READ_ERRORS),
    }, RAID_CONFIG)  # fmt: skip
    b.add("/v1/shards", "get", {
        "tags": ["shards"], "operationId": "list_shards",
        "responses": b.responses({200: b.response(200, "Nodes per shard ('None': unsharded)", {
            "type": "object", "properties": {"shards": {"type": "array", "items": {
                "type": "object", "properties": {"name": {"type": "string"},
                                                 "count": {"type": "integer", "minimum": 1}},
                "required": ["name", "count"], "additionalProperties": False}}},
            "required": ["shards"], "additionalProperties": False})}, READ_ERRORS),
    }, versions.SHARDS)  # fmt: skip
    b.add("/v1/events", "post", {
        "tags": ["events"], "operationId": "post_events",
        "summary": "External (network) events: checked, logged",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": copy.deepcopy(EVENTS_SCHEMA)}}},
        "responses": b.responses({204: b.response(204, "Accepted")}, (400, 403, 406, 413)),
    }, versions.EVENTS)  # fmt: skip
    for path, node_in_body in (("/v1/heartbeat/{node_ident}", False), ("/v1/heartbeat", True)):
        b.add(path, "post", {
            "tags": ["heartbeat"], "operationId": "heartbeat" + ("" if node_in_body else "_node"),
            "summary": "A deploy agent's heartbeat (no agent runs here: refused as a wrong agent token)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", **({"required": ["node_ident"]} if node_in_body else {})}}}},
            "responses": b.responses({202: b.response(202, "Accepted")}, (400, 403, 404, 406, 409, 413)),
        }, versions.LOOKUP_HEARTBEAT)  # fmt: skip
    resource_class_paths(b)
    runbook_trait_paths(b)


def resource_class_paths(b: Builder) -> None:
    """``/v1/resource_classes`` (from 1.117, ours)."""
    since = versions.RESOURCE_CLASS_VERSION
    rc = {"type": "object", "properties": {
        "name": {"type": "string", "pattern": schemas.RESOURCE_CLASS_NAME}, "created_at": TIME,
        "updated_at": TIME, "links": LINKS},
        "required": ["name", "created_at", "updated_at", "links"],
        "additionalProperties": False}  # fmt: skip
    b.add("/v1/resource_classes", "get", {
        "tags": ["resource_classes"], "operationId": "list_resource_classes",
        "responses": b.responses({200: b.response(200, "The classes", {
            "type": "object", "properties": {"resource_classes": {"type": "array", "items": rc}},
            "required": ["resource_classes"], "additionalProperties": False})}, READ_ERRORS),
    }, since)  # fmt: skip
    b.add("/v1/resource_classes", "post", {
        "tags": ["resource_classes"], "operationId": "create_resource_class",
        "parameters": [{"$ref": "#/components/parameters/ClientToken"}],
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": copy.deepcopy(schemas.RESOURCE_CLASS_CREATE)}}},
        "responses": b.responses({201: b.response(201, "Created", rc, location=True, replay=True)},
                                    WRITE_ERRORS),
    }, since)  # fmt: skip
    b.add("/v1/resource_classes/{resource_class}", "get", {
        "tags": ["resource_classes"], "operationId": "get_resource_class",
        "responses": b.responses({200: b.response(200, "A class", rc)}, READ_ERRORS),
    }, since)  # fmt: skip
    b.add("/v1/resource_classes/{resource_class}", "put", b.if_match({
        "tags": ["resource_classes"], "operationId": "ensure_resource_class",
        "description": "Idempotent: no body; 201 when created, 204 when it already exists.",
        "responses": b.responses({201: b.response(201, "Created", location=True),
                                     204: b.response(204, "Exists")}, WRITE_ERRORS, conditional=True),
    }), since)  # fmt: skip
    b.add("/v1/resource_classes/{resource_class}", "delete", b.if_match({
        "tags": ["resource_classes"], "operationId": "delete_resource_class",
        "responses": b.responses({204: b.response(204, "Deleted")}, WRITE_ERRORS,
                                    conditional=True),
    }), since)  # fmt: skip


def runbook_trait_paths(b: Builder) -> None:
    """``/v1/runbooks/{runbook_ident}/traits`` (from 1.112)."""
    since = versions.RUNBOOK_TRAITS
    item = "/v1/runbooks/{runbook_ident}/traits"
    done = {204: b.response(204, "Done")}
    b.add(item, "get", {
        "tags": ["runbooks"], "operationId": "list_runbook_traits",
        "responses": b.responses({200: b.response(200, "The traits", {
            "type": "object", "properties": {"traits": STRINGS}, "required": ["traits"],
            "additionalProperties": False})}, READ_ERRORS),
    }, since)  # fmt: skip
    b.add(item, "put", b.if_match({
        "tags": ["runbooks"], "operationId": "set_runbook_traits",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": copy.deepcopy(schemas.RUNBOOK_TRAITS)}}},
        "responses": b.responses(done, WRITE_ERRORS, conditional=True),
    }), since)  # fmt: skip
    b.add(item + "/{trait}", "put", b.if_match({
        "tags": ["runbooks"], "operationId": "add_runbook_trait",
        "responses": b.responses({204: b.response(204, "Added", location=True)}, WRITE_ERRORS,
                                    conditional=True),
    }), since)  # fmt: skip
    for path, op_id in ((item, "remove_runbook_traits"), (item + "/{trait}", "remove_runbook_trait")):
        b.add(path, "delete", b.if_match({
            "tags": ["runbooks"], "operationId": op_id,
            "responses": b.responses(done, WRITE_ERRORS, conditional=True),
        }), since)  # fmt: skip
