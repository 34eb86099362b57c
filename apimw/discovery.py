"""Ironic-shaped version discovery documents (``GET /`` and ``GET /v{major}``).

The documents carry both ``version`` (what Ironic and keystoneauth read as the
maximum) and ``max_version`` (the API-SIG name, which keystoneauth prefers).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from apimw._microversion_type import Version

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = ["DiscoveryResponder", "major_document", "request_base_url", "root_document", "version_entry"]

_CACHE_SIZE: Final = 64


def request_base_url(environ: WSGIEnvironment) -> str:
    """``scheme://host[:port]/script_name`` of the request, without a trailing slash."""
    scheme = environ.get("wsgi.url_scheme", "http")
    host = environ.get("HTTP_HOST")
    if not host:
        host = environ.get("SERVER_NAME", "localhost")
        port = environ.get("SERVER_PORT", "")
        if port and (scheme, port) not in (("http", "80"), ("https", "443")):
            host = f"{host}:{port}"
    return f"{scheme}://{host}{environ.get('SCRIPT_NAME', '')}".rstrip("/")


def version_entry(
    *, base_url: str, min_version: Version, max_version: Version, status: str = "CURRENT"
) -> dict[str, Any]:
    """One ``versions[]`` entry: id, links, status, min_version, version, max_version."""
    major = f"v{max_version.major}"
    return {
        "id": major,
        "links": [{"href": f"{base_url}/{major}/", "rel": "self"}],
        "status": status,
        "min_version": str(min_version),
        "version": str(max_version),
        "max_version": str(max_version),
    }


def root_document(
    *, base_url: str, min_version: Version, max_version: Version, name: str = "", description: str = ""
) -> dict[str, Any]:
    """The unversioned root: ``{"name", "description", "default_version", "versions": [...]}``."""
    entry = version_entry(base_url=base_url, min_version=min_version, max_version=max_version)
    return {"name": name, "description": description, "default_version": entry, "versions": [entry]}


def major_document(
    *,
    base_url: str,
    min_version: Version,
    max_version: Version,
    resources: Sequence[str] = (),
    media_type: str = "application/json",
) -> dict[str, Any]:
    """The versioned root ``/v{major}``: id, links, media_types, version and resource links."""
    entry = version_entry(base_url=base_url, min_version=min_version, max_version=max_version)
    major = entry["id"]
    doc: dict[str, Any] = {
        "id": major,
        "links": [{"href": f"{base_url}/{major}/", "rel": "self"}],
        "media_types": {"base": "application/json", "type": media_type},
    }
    for resource in resources:
        doc[resource] = [
            {"href": f"{base_url}/{major}/{resource}/", "rel": "self"},
            {"href": f"{base_url}/{resource}/", "rel": "bookmark"},
        ]
    doc["version"] = entry
    return doc


class DiscoveryResponder:
    """Answers ``GET``/``HEAD`` on ``/`` and ``/v{major}[/]``; returns ``None`` for anything else."""

    def __init__(
        self,
        *,
        min_version: Version,
        max_version: Version,
        name: str = "",
        description: str = "",
        resources: Sequence[str] = (),
        public_url: str | None = None,
        media_type: str = "application/json",
    ) -> None:
        self.min_version = min_version
        self.max_version = max_version
        self.name = name
        self.description = description
        self.resources = tuple(resources)
        self.public_url = public_url.rstrip("/") if public_url else None
        self.media_type = media_type
        major = f"/v{max_version.major}"
        self._kinds = {"": "root", "/": "root", major: "major", major + "/": "major"}
        self._bodies: dict[tuple[str, str], bytes] = {}

    def body(self, kind: str, base_url: str) -> bytes:
        key = (kind, base_url)
        cached = self._bodies.get(key)
        if cached is None:
            lo, hi = self.min_version, self.max_version
            if kind == "root":
                doc = root_document(
                    base_url=base_url, min_version=lo, max_version=hi,
                    name=self.name, description=self.description,
                )  # fmt: skip
            else:
                doc = major_document(
                    base_url=base_url, min_version=lo, max_version=hi,
                    resources=self.resources, media_type=self.media_type,
                )  # fmt: skip
            cached = json.dumps(doc).encode("utf-8")
            if len(self._bodies) >= _CACHE_SIZE:
                self._bodies.clear()
            self._bodies[key] = cached
        return cached

    def __call__(
        self, environ: WSGIEnvironment, start_response: StartResponse, version: Version
    ) -> list[bytes] | None:
        kind = self._kinds.get(environ.get("PATH_INFO", ""))
        method = environ.get("REQUEST_METHOD")
        if kind is None or method not in ("GET", "HEAD"):
            return None
        body = self.body(kind, self.public_url or request_base_url(environ))
        start_response(
            "200 OK",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
             ("Cache-Control", "no-cache")],
        )  # fmt: skip
        return [] if method == "HEAD" else [body]
