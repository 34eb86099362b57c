"""The microversion middleware's options: their table (:data:`OPTIONS`, read by paste.deploy,
oslo.config and Flask) and their documentation (:data:`OPTION_DOCS`, which both middlewares'
docstrings end with, so ``help()`` shows every option on either door)."""

from __future__ import annotations

from typing import Final

from apimw._config import Option, as_bool, as_list, as_optional_str, as_str, option_docs
from apimw._microversion_negotiation import config_version
from apimw._microversion_type import Version
from apimw.metrics import as_metrics

GROUP: Final = "apimw_microversion"


def as_version(value: str) -> Version:
    """A microversion ``X.Y`` from a configuration string."""
    return config_version("version", value.strip())


def as_optional_version(value: str) -> Version | None:
    """A microversion ``X.Y``, or ``None`` for an empty string."""
    return None if not value.strip() else as_version(value)


OPTIONS: Final = (
    Option("service_type", as_str, None,
           "The service type in OpenStack-API-Version: <service_type> X.Y (e.g. baremetal).",
           required=True),
    Option("min_version", as_version, None,
           "The lowest supported microversion, e.g. 1.1. A request without a version header is "
           "served at it.", required=True),
    Option("max_version", as_version, None,
           "The highest supported microversion, e.g. 1.115. 'latest' (any case) is served at it.",
           required=True),
    Option("legacy_header", as_optional_str, None,
           "The service's own request header, e.g. X-OpenStack-Ironic-API-Version. The standard "
           "header wins when both are sent."),
    Option("min_header", as_optional_str, None,
           "The response header naming the minimum version on every answer. Unset: from the legacy "
           "header (X-OpenStack-Ironic-API-Minimum-Version), else OpenStack-API-Minimum-Version."),
    Option("max_header", as_optional_str, None,
           "The response header naming the maximum version on every answer. Unset: from the legacy "
           "header, else OpenStack-API-Maximum-Version."),
    Option("pin_max_version", as_optional_version, None,
           "Advertise and serve at most this version (rolling upgrades: pin the new release to the "
           "old one's maximum until every node is upgraded)."),
    Option("error_profile", as_str, "api-sig",
           "Error body profile: api-sig (malformed version -> 400, {\"errors\": [...]}) or ironic "
           "(malformed -> 406, Ironic's error_message envelope)."),
    Option("service_aliases", as_list, [],
           "Other names accepted as the service type in the standard header.", kind="list"),
    Option("discovery", as_bool, False,
           "Answer GET/HEAD / and /v{major} with Ironic-shaped discovery documents. Place the "
           "middleware before authentication so that discovery stays unauthenticated.", kind="bool"),
    Option("discovery_name", as_str, "", "The name of the root discovery document."),
    Option("discovery_description", as_str, "", "The description of the root discovery document."),
    Option("discovery_resources", as_list, [],
           "The collections /v{major} links: names, or 'name:X.Y' for one that exists from version "
           "X.Y (see apimw.discovery).", kind="list"),
    Option("public_url", as_optional_str, None,
           "Base URL of the discovery links. Unset: from the request's Host, scheme and root."),
    Option("deprecated_below", as_optional_version, None,
           "Versions below this one are deprecated: their answers carry Deprecation: "
           "@<deprecated_since> (RFC 9745), Sunset (RFC 8594) and Link: <deprecation_link>; "
           "rel=\"deprecation\" when those are set, and discovery marks them (docs/microversion.md). "
           "Needs deprecated_since."),
    Option("deprecated_since", as_optional_str, None,
           "When the versions below deprecated_below were (or will be) deprecated: an HTTP-date, an "
           "ISO date (2026-11-01) or @<epoch seconds>; sent as Deprecation: @<epoch seconds>. "
           "Required with deprecated_below."),
    Option("sunset", as_optional_str, None,
           "When the deprecated versions may stop being served (the same forms); sent as Sunset."),
    Option("deprecation_link", as_optional_str, None,
           "URL of the deprecation notice; sent as Link: <url>; rel=\"deprecation\"."),
    Option("metrics", as_metrics, None,
           "An apimw.metrics.Metrics object (or 'package.module:attribute' naming one) told every "
           "request's outcome (served, deprecated, malformed, unsupported) and served version "
           "(e.g. apimw.metrics_prometheus:METRICS).", oslo=False),
)  # fmt: skip

OPTION_DOCS: Final = option_docs(OPTIONS, GROUP)
