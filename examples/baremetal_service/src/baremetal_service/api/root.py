"""``GET /`` and ``GET /v1``: Ironic-shaped discovery documents."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from . import versions
from .common import api_version, base_url, json_response

bp = Blueprint("root", __name__)

NAME = "OpenStack Ironic API"
DESCRIPTION = (
    "Ironic is an OpenStack project which enables the provision and management of baremetal machines."
)

#: Resource collections linked from /v1 and the version from which each is listed.
_RESOURCES: tuple[tuple[str, Any], ...] = (
    ("chassis", versions.MIN_VERSION),
    ("nodes", versions.MIN_VERSION),
    ("ports", versions.MIN_VERSION),
    ("drivers", versions.MIN_VERSION),
    ("portgroups", versions.PORTGROUPS),
    ("conductors", versions.CONDUCTORS),
    ("allocations", versions.ALLOCATIONS),
    ("events", versions.EVENTS),
    ("deploy_templates", versions.DEPLOY_TEMPLATES),
    ("shards", versions.SHARDS),
    ("runbooks", versions.RUNBOOKS),
    ("volume", versions.VOLUME),
    ("inspection_rules", versions.INSPECTION_RULES),
    ("resource_classes", versions.RESOURCE_CLASS_VERSION),
)


def _version_entry(base: str) -> dict[str, Any]:
    return {
        "id": "v1",
        "links": [{"href": f"{base}/v1/", "rel": "self"}],
        "status": "CURRENT",
        "min_version": str(versions.MIN_VERSION),
        "version": str(versions.MAX_VERSION),
    }


@bp.route("/", methods=["GET"])
def root() -> Response:
    entry = _version_entry(base_url())
    return json_response(
        {"name": NAME, "description": DESCRIPTION, "default_version": entry, "versions": [entry]}
    )


@bp.route("/v1", methods=["GET"])
@bp.route("/v1/", methods=["GET"])
def v1() -> Response:
    base = base_url()
    doc: dict[str, Any] = {
        "id": "v1",
        "links": [
            {"href": f"{base}/v1/", "rel": "self"},
            {
                "href": "https://docs.openstack.org//ironic/latest/contributor//webapi.html",
                "rel": "describedby",
                "type": "text/html",
            },
            # RFC 8631: this service's machine-readable description, for the served version
            {"href": f"{base}/v1/openapi.json", "rel": "service-desc", "type": "application/openapi+json"},
        ],
        "media_types": {"base": "application/json", "type": "application/vnd.openstack.ironic.v1+json"},
    }
    served = api_version()
    for name, since in _RESOURCES:
        if served >= since:
            doc[name] = [
                {"href": f"{base}/v1/{name}/", "rel": "self"},
                {"href": f"{base}/{name}/", "rel": "bookmark"},
            ]
    doc["version"] = _version_entry(base)
    return json_response(doc)
