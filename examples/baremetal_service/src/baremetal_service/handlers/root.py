"""``GET /`` and ``GET /v1``: Ironic-shaped discovery documents, built by :mod:`apimw.discovery`.

The app serves them itself (not the microversion middleware's ``discovery`` option) so that
they go through the app like any other answer: the base URL of the links is the configured
public endpoint or the checked Host header (:func:`.common.base_url`), and the answer carries
the app's headers.  apimw builds the documents: the collections each version links, Ironic's
version entries (without ``max_version``) and /v1's two links besides ``self``.
"""

from __future__ import annotations

from typing import Final

from flask import Blueprint, Response

from apimw.discovery import Link, Resource, major_document, root_document
from baremetal_service import versions
from baremetal_service.handlers.common import api_version, base_url, json_response

bp = Blueprint("root", __name__)

NAME: Final = "OpenStack Ironic API"
DESCRIPTION: Final = (
    "Ironic is an OpenStack project which enables the provision and management of baremetal machines."
)
MEDIA_TYPE: Final = "application/vnd.openstack.ironic.v1+json"

#: Resource collections linked from /v1 and the version from which each is listed.
RESOURCES: Final[tuple[Resource, ...]] = (
    "chassis",
    "nodes",
    "ports",
    "drivers",
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

#: /v1's links besides ``self``: Ironic's ``describedby``, and (RFC 8631) this service's
#: machine-readable description for the served version (``/`` hrefs: from the base URL).
LINKS: Final[tuple[Link, ...]] = (
    {
        "href": "https://docs.openstack.org//ironic/latest/contributor//webapi.html",
        "rel": "describedby",
        "type": "text/html",
    },
    {"href": "/v1/openapi.json", "rel": "service-desc", "type": "application/openapi+json"},
)


@bp.route("/", methods=["GET"])
def root() -> Response:
    return json_response(
        root_document(
            base_url=base_url(), min_version=versions.MIN_VERSION, max_version=versions.MAX_VERSION,
            name=NAME, description=DESCRIPTION, max_version_field=False,
        )  # fmt: skip
    )


@bp.route("/v1", methods=["GET"])
@bp.route("/v1/", methods=["GET"])
def v1() -> Response:
    return json_response(
        major_document(
            base_url=base_url(), min_version=versions.MIN_VERSION, max_version=versions.MAX_VERSION,
            resources=RESOURCES, media_type=MEDIA_TYPE, served=api_version(), links=LINKS,
            max_version_field=False,
        )  # fmt: skip
    )
