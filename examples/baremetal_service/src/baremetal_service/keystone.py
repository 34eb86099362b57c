"""``keystone``: Keystone tokens (keystonemiddleware's ``auth_token``) and Ironic's access rules.

What a deployer writes, as for Ironic: one oslo.config file (``--config-file``, default
``/etc/baremetal/baremetal.conf``) with the ``[keystone_authtoken]`` section auth_token
reads, and optionally ``[oslo_policy]`` (``policy_file``, ``enforce_scope``,
``enforce_new_defaults``)::

    [keystone_authtoken]
    www_authenticate_uri = https://keystone.example.com/v3
    auth_url = https://keystone.example.com/v3
    auth_type = password
    username = baremetal
    password = ...
    project_name = service
    user_domain_name = Default
    project_domain_name = Default
    memcached_servers = 127.0.0.1:11211

    [oslo_policy]
    policy_file = /etc/baremetal/policy.yaml

then ``baremetal-service --auth-strategy keystone --config-file /etc/baremetal/baremetal.conf``
(needs the ``keystone`` extra: ``pip install 'baremetal-service[keystone]'``).

The options reach auth_token as an oslo.config object (``oslo_config_config``), the way
Ironic hands them over: they are registered and checked by keystonemiddleware and the
auth plugin, so none is reported unknown (inline paste options are).  Without
``memcached_servers`` tokens are cached in the process (keystonemiddleware's in-process
cache; it says so once at start).

As on Ironic, the discovery documents (``GET /``, ``GET /v1``) are served without a token
(:class:`PublicRoutes`), and ``/healthcheck`` sits in front of authentication.  Every
other request needs a valid token; what it may then do is Ironic's policy
(:mod:`baremetal_service.policy`, applied by
:class:`baremetal_service.handlers.authorize.Authorizer`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from oslo_config import cfg

from apimw.errors import ConfigError
from baremetal_service import policy
from baremetal_service.auth import strip_identity
from baremetal_service.handlers.authorize import Authorizer

try:
    from keystonemiddleware import auth_token
except ImportError:  # the "keystone" extra is not installed: auth_filter says how to get it
    auth_token = None

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "CONFIG_FILE",
    "PUBLIC_PATHS",
    "PublicRoutes",
    "auth_filter",
    "authorizer",
    "filter_factory",
    "load_config",
]

#: The configuration file read when none is named (if it exists).
CONFIG_FILE: Final = "/etc/baremetal/baremetal.conf"
#: Paths served without a token (Ironic's public routes, less the ramdisk's): the discovery
#: documents, with or without a trailing slash or a ``.json`` suffix.
PUBLIC_PATHS: Final = ("/", "/v1")
_SERVICE_PROJECT_OPTS: Final = [
    cfg.StrOpt(
        "service_project_name",
        help="the project whose 'service' role is elevated by rule:service_role (Ironic's "
        "rbac_service_project_name with rbac_service_role_elevated_access); unset: none",
    ),
]


def load_config(config_files: Sequence[str] = (), *, required: bool = False) -> cfg.ConfigOpts:
    """The oslo.config configuration read from *config_files* (else :data:`CONFIG_FILE` when it
    exists); a file that does not exist, or none at all when *required*, is a
    :class:`apimw.errors.ConfigError`."""
    files = list(config_files) or ([CONFIG_FILE] if os.path.exists(CONFIG_FILE) else [])
    if required and not files:
        raise ConfigError(
            "keystone: no configuration file: give --config-file (or BAREMETAL_CONFIG_FILE) with the "
            f"[keystone_authtoken] section, or write {CONFIG_FILE}"
        )
    for path in files:
        if not os.path.isfile(path):
            raise ConfigError(f"keystone: the configuration file {path!r} does not exist")
    conf = cfg.ConfigOpts()
    conf.register_opts(_SERVICE_PROJECT_OPTS, group="rbac")
    try:
        conf([], project=policy.PROJECT, default_config_files=files)
    except cfg.Error as exc:
        raise ConfigError(f"keystone: cannot read {', '.join(files)}: {exc}") from None
    return conf


def authorizer(conf: cfg.ConfigOpts, *, tokens_only: bool = False) -> Authorizer:
    """Ironic's access rules with *conf*'s ``[oslo_policy]`` (a policy file overrides rules);
    *tokens_only*: for the requests auth_token validated alone (:class:`Authorizer`)."""
    return Authorizer(
        policy.make_enforcer(conf), service_project=conf.rbac.service_project_name, tokens_only=tokens_only
    )


class PublicRoutes:
    """Send requests for the public paths straight to *app*, every other to *auth* (in front of *app*).

    A public request has every identity header the client sent removed first: behind it,
    nothing reads an identity no one verified.
    """

    def __init__(
        self, app: WSGIApplication, *, auth: WSGIApplication, paths: Iterable[str] = PUBLIC_PATHS
    ) -> None:
        self.app = app
        self.auth = auth
        routes = "|".join(re.escape(p.rstrip("/")) for p in paths)
        self._public = re.compile(f"(?:{routes})/?(?:\\.json)?\\Z")

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if self._public.match(environ.get("PATH_INFO") or "/"):
            strip_identity(environ)
            return self.app(environ, start_response)
        return self.auth(environ, start_response)


def auth_filter(conf: cfg.ConfigOpts) -> Any:
    """``app -> app``: auth_token configured by *conf*, with :class:`PublicRoutes` in front."""
    if auth_token is None:
        raise ConfigError(
            "the keystone auth strategy needs keystonemiddleware: pip install 'baremetal-service[keystone]'"
        )

    def _wrap(app: WSGIApplication) -> WSGIApplication:
        return PublicRoutes(app, auth=auth_token.AuthProtocol(app, {"oslo_config_config": conf}))

    return _wrap


def filter_factory(global_conf: Mapping[str, Any], **local_conf: str) -> Any:
    """paste.deploy: ``paste.filter_factory = baremetal_service.keystone:filter_factory`` with
    ``config_file = /etc/baremetal/baremetal.conf`` (several: comma separated): auth_token
    reading that file's ``[keystone_authtoken]``, and the public routes open."""
    files = [f.strip() for f in str(local_conf.get("config_file", "")).split(",") if f.strip()]
    return auth_filter(load_config(files, required=True))
