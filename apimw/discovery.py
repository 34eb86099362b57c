"""Ironic-shaped version discovery documents (``GET /`` and ``GET /v{major}``).

The documents carry both ``version`` (what Ironic and keystoneauth read as the
maximum) and ``max_version`` (the API-SIG name, which keystoneauth prefers).
``/v{major}`` links each resource collection; a collection that exists only from some
microversion on (Ironic's portgroups from 1.24) is linked at the versions that have it:
give it as ``("portgroups", "1.24")`` or ``"portgroups:1.24"``.

Deprecation (the microversion middleware's ``deprecated_below``): when every version of
the major version is deprecated (the floor above ``max_version``) its ``status`` is
``DEPRECATED``, the value the API-SIG version discovery guideline gives a version that
may be removed.  The guideline has no word for deprecated *microversions* within a
major version, so a floor inside the range is said by a field of apimw's own, which
clients that do not know it ignore: ``"deprecated_below": "1.50"``.  Either way the
entry then carries ``"deprecated_since"`` and, when configured, ``"sunset"`` (HTTP-dates,
as the ``Deprecation`` and ``Sunset`` headers give them) and a ``{"rel": "deprecation"}``
link to the notice.

A service that keeps another service's wire exactly (the example keeps Ironic's) can leave
``max_version`` out (``max_version_field=False``: Ironic's entries name the maximum only as
``version``) and add links of its own to ``/v{major}`` beside ``self``, such as Ironic's
``describedby`` or an RFC 8631 ``service-desc`` (``links=[...]``; an ``href`` that starts
with ``/`` is taken relative to the base URL).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from apimw._config import as_list
from apimw._microversion_deprecation import Deprecation, http_date
from apimw._microversion_type import Version, parse_version
from apimw.errors import ConfigError, VersionParseError

__all__ = [
    "DiscoveryResponder",
    "Link",
    "Resource",
    "base_url",
    "check_links",
    "links_at",
    "major_document",
    "request_base_url",
    "resource_windows",
    "root_document",
    "version_entry",
]

_CACHE_SIZE: Final = 256
#: documents under a longer base URL are built each time, never kept
_CACHED_URL_LENGTH: Final = 256

#: A resource collection linked from ``/v{major}``: its name (linked at every version), or
#: its name and the version it appeared in, as a pair or as ``"name:X.Y"`` (the form a
#: paste.deploy or oslo.config list can carry).
Resource = str | tuple[str, str | Version | None]

#: A link of ``/v{major}`` besides ``self``: ``{"href": ..., "rel": ..., "type": ...}``
#: (``type`` optional); an ``href`` starting with ``/`` is relative to the base URL.
Link = Mapping[str, str]


def resource_windows(resources: str | Sequence[Resource]) -> tuple[tuple[str, Version | None], ...]:
    """*resources* as ``(name, since)`` pairs (``since`` ``None``: every version), validated:
    a bad name or version is a :class:`ConfigError` naming ``discovery_resources``.  A string
    is read as a paste ini value is (:func:`apimw.config.as_list`: comma or newline separated)."""
    windows: list[tuple[str, Version | None]] = []
    for resource in as_list(resources) if isinstance(resources, str) else resources:
        if isinstance(resource, str):
            name, colon, since_text = resource.partition(":")
            since: str | Version | None = since_text if colon else None
        else:
            name, since = resource
        if not name or "/" in name or any(c.isspace() for c in name):
            raise ConfigError(f"discovery_resources: {resource!r} does not name a collection")
        try:
            windows.append((name, None if since is None else parse_version(since)))
        except VersionParseError as exc:
            raise ConfigError(f"discovery_resources: {resource!r}: {exc}") from None
    return tuple(windows)


def base_url(scheme: str, host: str | None, server_name: str, server_port: str, root: str) -> str:
    """``scheme://host[:port]/root`` of a request, without a trailing slash: *host* is its
    ``Host`` header, else the server's name and port (the port left out when it is the
    scheme's default)."""
    if not host:
        host = server_name
        if server_port and (scheme, server_port) not in (("http", "80"), ("https", "443")):
            host = f"{host}:{server_port}"
    return f"{scheme}://{host}{root}".rstrip("/")


def request_base_url(environ: Mapping[str, Any]) -> str:
    """:func:`base_url` of the WSGI request *environ*."""
    return base_url(
        environ.get("wsgi.url_scheme", "http"),
        environ.get("HTTP_HOST"),
        environ.get("SERVER_NAME", "localhost"),
        environ.get("SERVER_PORT", ""),
        environ.get("SCRIPT_NAME", ""),
    )


def links_at(base_url: str, links: Sequence[Link]) -> list[dict[str, str]]:
    """*links* as they appear in a document served from *base_url* (see :data:`Link`)."""
    out = []
    for link in links:
        href = link["href"]
        out.append({**link, "href": base_url + href if href.startswith("/") else href})
    return out


def check_links(links: Sequence[Link]) -> tuple[Link, ...]:
    """*links*, validated: each has a string ``href`` and ``rel`` (:class:`ConfigError` otherwise)."""
    for link in links:
        if not all(isinstance(link.get(key), str) and link.get(key) for key in ("href", "rel")):
            raise ConfigError(f"discovery links: {link!r} needs an href and a rel")
        if not all(isinstance(value, str) for value in link.values()):
            raise ConfigError(f"discovery links: {link!r}: every value is a string")
    return tuple(dict(link) for link in links)


def version_entry(
    *,
    base_url: str,
    min_version: Version,
    max_version: Version,
    status: str = "CURRENT",
    deprecated_below: Version | None = None,
    deprecation: Deprecation | None = None,
    max_version_field: bool = True,
) -> dict[str, Any]:
    """One ``versions[]`` entry: id, links, status, min_version, version, max_version (unless
    *max_version_field* is false), and what is deprecated (see the module docstring) when
    *deprecated_below* is set."""
    major = f"v{max_version.major}"
    entry: dict[str, Any] = {
        "id": major,
        "links": [{"href": f"{base_url}/{major}/", "rel": "self"}],
        "status": status,
        "min_version": str(min_version),
        "version": str(max_version),
    }
    if max_version_field:
        entry["max_version"] = str(max_version)
    if deprecated_below is not None and deprecation is not None:
        if deprecated_below > max_version:
            entry["status"] = "DEPRECATED"
        else:
            entry["deprecated_below"] = str(deprecated_below)
        entry["deprecated_since"] = http_date(deprecation.since)
        if deprecation.sunset is not None:
            entry["sunset"] = http_date(deprecation.sunset)
        if deprecation.link is not None:
            entry["links"].append({"href": deprecation.link, "rel": "deprecation"})
    return entry


def root_document(
    *,
    base_url: str,
    min_version: Version,
    max_version: Version,
    name: str = "",
    description: str = "",
    deprecated_below: Version | None = None,
    deprecation: Deprecation | None = None,
    max_version_field: bool = True,
) -> dict[str, Any]:
    """The unversioned root: ``{"name", "description", "default_version", "versions": [...]}``."""
    entry = version_entry(
        base_url=base_url, min_version=min_version, max_version=max_version,
        deprecated_below=deprecated_below, deprecation=deprecation,
        max_version_field=max_version_field,
    )  # fmt: skip
    return {"name": name, "description": description, "default_version": entry, "versions": [entry]}


def major_document(
    *,
    base_url: str,
    min_version: Version,
    max_version: Version,
    resources: str | Sequence[Resource] = (),
    media_type: str = "application/json",
    served: Version | None = None,
    deprecated_below: Version | None = None,
    deprecation: Deprecation | None = None,
    links: Sequence[Link] = (),
    max_version_field: bool = True,
) -> dict[str, Any]:
    """The versioned root ``/v{major}``: id, links, media_types, version and resource links.

    A resource given with the version it appeared in is linked only when *served* (the
    request's version; default *max_version*) is at least that version.  *links* follow
    ``self`` in ``links`` (see :data:`Link`).
    """
    served = max_version if served is None else served
    entry = version_entry(
        base_url=base_url, min_version=min_version, max_version=max_version,
        deprecated_below=deprecated_below, deprecation=deprecation,
        max_version_field=max_version_field,
    )  # fmt: skip
    major = entry["id"]
    doc: dict[str, Any] = {
        "id": major,
        "links": [{"href": f"{base_url}/{major}/", "rel": "self"}, *links_at(base_url, links)],
        "media_types": {"base": "application/json", "type": media_type},
    }
    for resource, since in resource_windows(resources):
        if since is not None and served < since:
            continue
        doc[resource] = [
            {"href": f"{base_url}/{major}/{resource}/", "rel": "self"},
            {"href": f"{base_url}/{resource}/", "rel": "bookmark"},
        ]
    doc["version"] = entry
    return doc


class DiscoveryResponder:
    """The documents of ``GET``/``HEAD`` ``/`` and ``/v{major}[/]`` (sans-IO: :meth:`kind` tells
    whether a path is one, :meth:`document` gives its answer; the bodies are kept, bounded)."""

    def __init__(
        self,
        *,
        min_version: Version,
        max_version: Version,
        name: str = "",
        description: str = "",
        resources: str | Sequence[Resource] = (),
        public_url: str | None = None,
        media_type: str = "application/json",
        deprecated_below: Version | None = None,
        deprecation: Deprecation | None = None,
        links: Sequence[Link] = (),
        max_version_field: bool = True,
    ) -> None:
        self.links = check_links(links)
        self.max_version_field = max_version_field
        self.min_version = min_version
        self.deprecated_below = deprecated_below
        self.deprecation = deprecation
        self.max_version = max_version
        self.name = name
        self.description = description
        self.resources = resource_windows(resources)
        # the /v{major} document depends on the served version when a resource has a since
        self._per_version = any(since is not None for _, since in self.resources)
        self.public_url = public_url.rstrip("/") if public_url else None
        self.media_type = media_type
        major = f"/v{max_version.major}"
        self._kinds = {"": "root", "/": "root", major: "major", major + "/": "major"}
        self._bodies: dict[tuple[str, str, Version | None], bytes] = {}

    def body(self, kind: str, base_url: str, served: Version | None = None) -> bytes:
        """The document's bytes; *served* (default the maximum) selects the linked resources."""
        key = (kind, base_url, served if kind == "major" and self._per_version else None)
        cached = self._bodies.get(key)
        if cached is None:
            lo, hi = self.min_version, self.max_version
            if kind == "root":
                doc = root_document(
                    base_url=base_url, min_version=lo, max_version=hi,
                    name=self.name, description=self.description,
                    deprecated_below=self.deprecated_below, deprecation=self.deprecation,
                    max_version_field=self.max_version_field,
                )  # fmt: skip
            else:
                doc = major_document(
                    base_url=base_url, min_version=lo, max_version=hi,
                    resources=self.resources, media_type=self.media_type, served=served,
                    deprecated_below=self.deprecated_below, deprecation=self.deprecation,
                    links=self.links, max_version_field=self.max_version_field,
                )  # fmt: skip
            cached = json.dumps(doc).encode("utf-8")
            if len(base_url) > _CACHED_URL_LENGTH:  # a Host header of the client's choosing
                return cached
            if len(self._bodies) >= _CACHE_SIZE:
                self._bodies.clear()
            self._bodies[key] = cached
        return cached

    def kind(self, path: str) -> str | None:
        """``root`` or ``major`` when *path* (below the app's root) is a discovery document, else ``None``."""
        return self._kinds.get(path)

    def document(
        self, kind: str, method: str, base_url: str, version: Version
    ) -> tuple[list[tuple[str, str]], bytes]:
        """The 200 answer's headers and body of the document *kind* (:meth:`kind`) served at
        *version*, its links under *base_url* (the ``public_url`` option wins); no body for ``HEAD``."""
        body = self.body(kind, self.public_url or base_url, version)
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                   ("Cache-Control", "no-cache")]  # fmt: skip
        return headers, b"" if method == "HEAD" else body
