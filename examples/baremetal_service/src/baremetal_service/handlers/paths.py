"""Where Ironic's URLs lead: paths without a version, the ``.json`` suffix, the console alias.

Ironic's root controller serves a path that does not start with its version
(``/nodes/detail?instance_uuid=...``, ``/drivers/fake-hardware/properties``) as the same
path under ``/v1``; ironic-tempest-plugin's client calls several of them so.  Below 1.91
Ironic takes ``/v1/nodes/<ident>.json`` for ``/v1/nodes/<ident>`` when showing, updating or
deleting nodes, port groups, deploy templates and allocations (pecan's content type guess
from the suffix, turned off at 1.91: from then on such a path is a 404).  And its node
controller serves ``/v1/nodes/states/console/<ident>`` as ``/v1/nodes/<ident>/states/console``.

:func:`ironic_paths` rewrites ``PATH_INFO`` so before the app routes the request;
:func:`ironic_path` is the rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from apimw import Version
from apimw.microversion import served_version

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = ["JSON_SUFFIX_UNTIL", "ironic_path", "ironic_paths"]

#: The last version that reads a ``.json`` suffix off an item's identifier.
JSON_SUFFIX_UNTIL: Final = Version(1, 90)
#: The items whose identifier loses its ``.json`` suffix (show, update, delete).
_JSON_ITEM: Final = re.compile(r"/v1/(nodes|portgroups|deploy_templates|allocations)/([^/]+)\.json/?\Z")
_CONSOLE_ALIAS: Final = re.compile(r"/v1/nodes/states/console/([^/]+)/?\Z")


def ironic_path(path: str, version: Version | None) -> str:
    """The path Ironic serves *path* as, at *version* (``None``: the minimum)."""
    first = path.lstrip("/").partition("/")[0]
    if first and first != "v1":
        path = "/v1/" + path.lstrip("/")
    if version is None or version <= JSON_SUFFIX_UNTIL:
        item = _JSON_ITEM.match(path)
        if item is not None:
            return f"/v1/{item[1]}/{item[2]}"
    console = _CONSOLE_ALIAS.match(path)
    if console is not None:
        return f"/v1/nodes/{console[1]}/states/console"
    return path


def ironic_paths(app: WSGIApplication) -> WSGIApplication:
    """*app*, called with ``PATH_INFO`` as Ironic would route it (:func:`ironic_path`)."""

    def routed(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        environ["PATH_INFO"] = ironic_path(path, served_version(environ))
        return app(environ, start_response)

    return routed
