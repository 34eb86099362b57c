"""``/v1/chassis`` and ``/v1/chassis/{uuid}/nodes``."""

from __future__ import annotations

from flask import Blueprint, Response

from . import schemas, serialize, versions
from .resources import Resource

bp = Blueprint("chassis", __name__)

CHASSIS = Resource(
    kind="chassis",
    collection="chassis",
    field_versions=versions.CHASSIS_FIELD_VERSIONS,
    fields=serialize.CHASSIS_FIELDS,
    list_fields=serialize.CHASSIS_LIST_FIELDS,
    create_schema=schemas.CHASSIS_CREATE,
    patchable=("description", "extra"),
    sort_keys=("uuid", "description", "created_at", "updated_at"),
    sublinks=("nodes",),
    scoped=False,
)


@bp.route("/v1/chassis", methods=["GET"])
def list_chassis() -> Response:
    return CHASSIS.index()


@bp.route("/v1/chassis/detail", methods=["GET"])
def list_chassis_detail() -> Response:
    return CHASSIS.index(True, path="chassis/detail")


@bp.route("/v1/chassis", methods=["POST"])
def create_chassis() -> Response:
    return CHASSIS.create()


@bp.route("/v1/chassis/<ident>", methods=["GET"])
def get_chassis(ident: str) -> Response:
    return CHASSIS.get(ident)


@bp.route("/v1/chassis/<ident>", methods=["PATCH"])
def patch_chassis(ident: str) -> Response:
    return CHASSIS.patch(ident)


@bp.route("/v1/chassis/<ident>", methods=["DELETE"])
def delete_chassis(ident: str) -> Response:
    return CHASSIS.delete(ident)
