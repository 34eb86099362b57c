"""An OpenAPI 3.1 document of the bare-metal API, for any microversion.

    document(Version(1, 52)) -> dict (JSON-ready)
    install(flask_app)       -> serves it at GET /v1/openapi.json (the deployment calls it)

The source of truth is the resource declarations, read as they are
(``baremetal_service.objects.catalog.declarations()``: each a ``Resource`` with ``kind``,
``collection``, ``fields`` (in Ironic's order, with the version of each), ``list_fields``,
``create_schema``, ``patchable``, ``sort_keys``, ``since``, ``filters``, ``bool_filters``, ``list_key``,
``sublinks``, ``detail_since``; the nodes' is ``objects/nodes.py``'s ``NODES``), with the
values the node list checks (``handlers/nodes.py``) and the schemas (``schemas.py``).  At a
version V the document holds exactly what V serves:

* a resource's paths from its ``since``; a field from its version in ``fields``
  (absent from every schema below it); filters from theirs; ``fields`` from 1.8,
  ``detail`` from 1.43;
* request bodies: the create schema (fields of V only) and PATCH as a JSON Patch array
  naming the patchable fields of V;
* responses: one resource (every field of V, ``additionalProperties: false``), a list
  (``{<collection>: [...], "next": url}``), Ironic's error body for 400/403/404/406/409/
  412/413/415 (``{"error_message": "<JSON string>"}`` plus apimw's ``errors`` list);
* headers: the microversion headers on requests and responses, ``ETag`` and the ``etag``
  field from 1.116 with ``If-Match`` (412), ``X-Client-Token`` on creates (409, replay).

Each field, parameter and operation carries ``x-introduced-in`` (the version it appeared
in).  Only operations the Flask router really serves are documented.

The modules, one concern each: :mod:`.declarations` (the declarations documented, and
what they do not state), :mod:`.builder` (one version's paths and schemas, the generic resource paths),
:mod:`.node_paths` and :mod:`.paths` (the operations no declaration states),
:mod:`.components` (shared parameters, headers, errors) and :mod:`.document` (the whole
document, per app, and the route serving it).
"""

from __future__ import annotations

from baremetal_service.openapi.document import (
    OPENAPI_VERSION,
    PATH,
    Documents,
    build,
    document,
    document_json,
    install,
    routes_of,
    versions_documented,
)

__all__ = [
    "OPENAPI_VERSION",
    "PATH",
    "Documents",
    "build",
    "document",
    "document_json",
    "install",
    "routes_of",
    "versions_documented",
]
