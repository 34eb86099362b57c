"""One version's whole document, the documents of an app, and the route that serves them.

The document is built from the resource declarations, the schemas and the Flask app's
``url_map`` (only operations the router serves are documented).  The handlers do not
import this package: the deployment calls :func:`install` on the Flask app it built, which
registers ``GET /v1/openapi.json`` there, so imports run one way (deployment -> openapi ->
handlers).
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from typing import Any, Final

from flask import Flask, Response, current_app
from werkzeug.routing import Map

from apimw import Version
from baremetal_service import versions
from baremetal_service.handlers.common import api_version, encode_json
from baremetal_service.handlers.routes import create_flask_app
from baremetal_service.openapi.builder import Builder, Routes
from baremetal_service.openapi.components import components
from baremetal_service.openapi.declarations import declared
from baremetal_service.openapi.node_paths import node_paths
from baremetal_service.openapi.paths import discovery_paths

OPENAPI_VERSION: Final = "3.1.0"
#: Where the document is served (linked from /v1 as its RFC 8631 ``service-desc``).
PATH: Final = "/v1/openapi.json"
#: ``app.extensions`` key of an app's :class:`Documents`.
_EXTENSION: Final = "baremetal_service.openapi"


def build(version: Version, routes: Routes) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API served at *version* by a router serving *routes*."""
    b = Builder(version, declared(), routes)
    discovery_paths(b)
    for decl in b.decls.values():
        b.resource_paths(decl)
    for decl in b.decls.values():
        if decl.since <= version:
            b.sub_collections(decl)
    node_paths(b)
    parts = components(b)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Bare-metal API (Ironic v1 wire-compatible)",
            "version": str(version),
            "description": f"The API as served at microversion {version} (send "
            f"`{versions.LEGACY_HEADER}: {version}`). Fields, parameters and operations carry "
            "`x-introduced-in`, the version they appeared in.",
            "x-minimum-version": str(versions.MIN_VERSION),
            "x-maximum-version": str(versions.MAX_VERSION),
        },
        "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
        "paths": dict(sorted(b.paths.items())),
        "components": parts,
    }


def routes_of(url_map: Map) -> Routes:
    """(path template with every parameter as ``{}``, method) for each route *url_map* serves."""
    out: set[tuple[str, str]] = set()
    for rule in url_map.iter_rules():
        templates = [rule.rule]
        alternatives = re.search(r"<any\(([^)]*)\):\w+>", rule.rule)
        if alternatives:
            templates = [
                rule.rule.replace(alternatives.group(0), name.strip())
                for name in alternatives.group(1).split(",")
            ]
        for template in templates:
            normal = re.sub(r"<[^>]+>", "{}", template).rstrip("/") or "/"
            for method in rule.methods or ():
                out.add((normal, method.lower()))
    return frozenset(out)


class Documents:
    """The documents of one Flask app, per version, built on first use from its routes (the
    app has all of them by its first request)."""

    def __init__(self, url_map: Map) -> None:
        self._url_map = url_map
        self._routes: Routes | None = None
        self._documents: dict[Version, dict[str, Any]] = {}
        self._json: dict[Version, bytes] = {}

    def routes(self) -> Routes:
        if self._routes is None:
            self._routes = routes_of(self._url_map)
        return self._routes

    def document(self, version: Version) -> dict[str, Any]:
        """The document of *version* (a fresh copy each call)."""
        built = self._documents.get(version)
        if built is None:  # at most one per served version: bounded by the served range
            built = self._documents[version] = build(version, self.routes())
        return copy.deepcopy(built)

    def json(self, version: Version) -> bytes:
        """:meth:`document` serialized (cached per version: the service answers it often)."""
        body = self._json.get(version)
        if body is None:
            body = self._json[version] = encode_json(self.document(version))
        return body


def _serve() -> Response:
    """``GET /v1/openapi.json``: the document of the version this request is served at.

    The version headers choose the document like any other answer: no header -> the minimum,
    ``latest`` -> the maximum, out of range -> the microversion middleware's 406.
    """
    documents: Documents = current_app.extensions[_EXTENSION]
    return Response(documents.json(api_version()), status=200, content_type="application/json")


def install(app: Flask) -> Flask:
    """Serve the document on *app* at :data:`PATH` (returns *app*)."""
    app.extensions[_EXTENSION] = Documents(app.url_map)
    app.add_url_rule(PATH, endpoint="openapi.document", view_func=_serve, methods=["GET"])
    return app


@lru_cache(maxsize=1)
def _documents() -> Documents:
    """The documents of the service's own routes (an app without a service: nothing runs)."""
    return install(create_flask_app(None)).extensions[_EXTENSION]


def document(version: Version) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API served at *version* (a fresh copy each call)."""
    return _documents().document(version)


def document_json(version: Version) -> bytes:
    """:func:`document` serialized."""
    return _documents().json(version)


def versions_documented() -> tuple[Version, ...]:
    """The versions that change something (the history), for tests and tooling."""
    return tuple(v for v, _ in versions.HISTORY)
