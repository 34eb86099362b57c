"""``/v1/deploy_templates`` (Ironic 1.55): the shared CRUD of :class:`~.resources.Resource`."""

from __future__ import annotations

from flask import Blueprint, Response

from . import serialize, versions
from .collections_a_schemas import DEPLOY_TEMPLATE_CREATE
from .resources import Resource

bp = Blueprint("deploy_templates", __name__)

FIELDS = ("uuid", "created_at", "updated_at", "name", "extra", "links", "steps", "etag")
serialize.register("deploy_template", versions.DEPLOY_TEMPLATE_FIELD_VERSIONS, FIELDS, defaults={"steps": []})

DEPLOY_TEMPLATES = Resource(
    kind="deploy_template",
    collection="deploy_templates",
    field_versions=versions.DEPLOY_TEMPLATE_FIELD_VERSIONS,
    fields=FIELDS,
    list_fields=("uuid", "name"),
    create_schema=DEPLOY_TEMPLATE_CREATE,
    patchable=("extra", "name", "steps", "description"),
    sort_keys=("uuid", "name", "created_at", "updated_at"),
    since=versions.DEPLOY_TEMPLATES,
    scoped=False,
    backend="deploy_templates",
)


@bp.route("/v1/deploy_templates", methods=["GET"])
def list_deploy_templates() -> Response:
    return DEPLOY_TEMPLATES.index()


@bp.route("/v1/deploy_templates/detail", methods=["GET"])
def list_deploy_templates_detail() -> Response:
    return DEPLOY_TEMPLATES.index(True, path="deploy_templates/detail")


@bp.route("/v1/deploy_templates", methods=["POST"])
def create_deploy_template() -> Response:
    return DEPLOY_TEMPLATES.create()


@bp.route("/v1/deploy_templates/<ident>", methods=["GET"])
def get_deploy_template(ident: str) -> Response:
    return DEPLOY_TEMPLATES.get(ident)


@bp.route("/v1/deploy_templates/<ident>", methods=["PATCH"])
def patch_deploy_template(ident: str) -> Response:
    return DEPLOY_TEMPLATES.patch(ident)


@bp.route("/v1/deploy_templates/<ident>", methods=["DELETE"])
def delete_deploy_template(ident: str) -> Response:
    return DEPLOY_TEMPLATES.delete(ident)
