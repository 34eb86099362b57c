"""``bmctl``: the example service's command line, on cliff (the framework of the ``openstack`` CLI).

    bmctl --os-endpoint http://127.0.0.1:6385 node create --driver fake-hardware --name n1
    bmctl node set n1 --extra owner=ops --etag          # read first, send its etag in If-Match
    bmctl node manage n1 --wait && bmctl node provide n1 --wait

Errors are one line on stderr and a non-zero exit code (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
from typing import Any

from cliff.app import App
from cliff.commandmanager import CommandManager

import baremetal_service.bmctl.commands as commands
from apimw.client import UnsupportedVersion
from apimw.errors import ApimwError
from baremetal_service.bmctl.client import BaremetalClient

LOG = logging.getLogger(__name__)


def _env(*names: str, default: str | None = None) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return default


class BmctlApp(App):
    """The cliff application: global ``--os-*`` options, a client built on first use."""

    NAME = "bmctl"

    def __init__(self) -> None:
        manager = CommandManager("bmctl.cli")  # no entry points: the commands are added below
        for name, command in commands.COMMANDS.items():
            manager.add_command(name, command)
        super().__init__(
            description="Command line for the example bare-metal service (Ironic's v1 API).",
            version=_version(),
            command_manager=manager,
            deferred_help=True,
        )
        self._client: BaremetalClient | None = None

    def build_option_parser(
        self, description: str | None, version: str | None, argparse_kwargs: dict[str, Any] | None = None
    ) -> argparse.ArgumentParser:
        parser = super().build_option_parser(description, version, argparse_kwargs)
        parser.prog = self.NAME
        parser.add_argument(
            "--os-endpoint", metavar="<url>", default=_env("OS_ENDPOINT", "OS_BAREMETAL_ENDPOINT", "OS_URL"),
            help="The service's root URL, e.g. http://127.0.0.1:6385 (env OS_ENDPOINT).")
        parser.add_argument(
            "--os-baremetal-api-version", metavar="<version>",
            default=_env("OS_BAREMETAL_API_VERSION"),
            help="Microversion X.Y or 'latest' (env OS_BAREMETAL_API_VERSION); default: negotiate "
                 "the highest version both sides know.")
        parser.add_argument(
            "--os-project-id", metavar="<id>", default=_env("OS_PROJECT_ID"),
            help="Sent as X-Project-Id (noauth deployments; the scope of client tokens) (env OS_PROJECT_ID).")
        parser.add_argument(
            "--os-token", metavar="<token>", default=_env("OS_TOKEN", "OS_AUTH_TOKEN"),
            help="Sent as X-Auth-Token (env OS_TOKEN).")
        parser.add_argument("--os-username", metavar="<name>", default=_env("OS_USERNAME"),
                            help="HTTP basic auth user (env OS_USERNAME).")
        parser.add_argument("--os-password", metavar="<password>", default=_env("OS_PASSWORD"),
                            help="HTTP basic auth password (env OS_PASSWORD).")
        # A string default goes through ``type`` too, so a bad BMCTL_TIMEOUT is an argument error.
        parser.add_argument("--timeout", metavar="<seconds>", type=_timeout,
                            default=_env("BMCTL_TIMEOUT", default="30"),
                            help="Per-request timeout (default 30; env BMCTL_TIMEOUT).")
        return parser

    @property
    def client(self) -> BaremetalClient:
        if self._client is None:
            endpoint = self.options.os_endpoint
            if not endpoint:
                raise commands.CommandError(
                    "no endpoint: give --os-endpoint <url> or set OS_ENDPOINT (e.g. http://127.0.0.1:6385)")
            options = {
                "project_id": self.options.os_project_id, "auth_token": self.options.os_token,
                "username": self.options.os_username, "password": self.options.os_password,
                "timeout": self.options.timeout,
            }
            try:
                version = self.options.os_baremetal_api_version
                self._client = BaremetalClient(endpoint, version=version, **options)
            except UnsupportedVersion as exc:
                raise commands.CommandError(f"{exc}; {_server_range(endpoint, options)}") from exc
        return self._client

    def configure_logging(self) -> None:
        super().configure_logging()
        # One line per error: the libraries' own chatter stays below WARNING unless -v.
        if self.options.verbose_level <= 1:
            for name in ("urllib3", "stevedore", "cliff", "apimw"):
                logging.getLogger(name).setLevel(logging.WARNING)

    def clean_up(self, cmd: Any, result: int, err: BaseException | None) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _timeout(text: str) -> float:
    """``--timeout`` / ``BMCTL_TIMEOUT``: a positive, finite number of seconds."""
    return commands.seconds(text, zero=False, what=" (--timeout, or BMCTL_TIMEOUT)")


def _server_range(endpoint: str, options: dict[str, Any]) -> str:
    """What the server supports, for a message about a version this client cannot send."""
    try:
        with BaremetalClient(endpoint, **options) as probe:
            probe.session.negotiate()
            known = probe.session.server_range()
    except ApimwError as exc:
        return f"the server's range is unknown ({exc})"
    if known is None or not known.versioned:
        return f"{endpoint} has no microversions"
    return f"{endpoint} supports [{known.min_version}, {known.max_version}]"


def _version() -> str:
    try:
        return importlib.metadata.version("baremetal-service")
    except importlib.metadata.PackageNotFoundError:  # not installed as a distribution
        return "0"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        args = ["help"]  # no interactive mode
    return BmctlApp().run(args)
