"""The bare-metal API as Python objects: apimw's generic resource layer with Ironic's v1 paths.

Works against the example service (etags from 1.116, client-token replay) and against
OpenStack Ironic (no etags, client tokens ignored: creates get a token, a warning and no
automatic retries; asking for etags is a clear :class:`~apimw.client_resources.EtagUnsupported`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import Any, Final, TextIO

import requests

from apimw import Version
from apimw.client import ServerRange, VersionedSession
from apimw.client_resources import (
    ClientError,
    Resource,
    ResourceClient,
    ResourceManager,
    RetryPolicy,
)

SERVICE_TYPE: Final = "baremetal"
LEGACY_HEADER: Final = "X-OpenStack-Ironic-API-Version"
#: The newest version bmctl knows (the example service's maximum).
CLIENT_MAX: Final = "1.117"
#: The first version with etags (the example service's; OpenStack Ironic 39.0 stops at 1.115).
ETAG_VERSION: Final = Version(1, 116)
DEPLOY_VERBS_VERSION: Final = Version(1, 73)

#: Where each provision verb ends when it succeeds.
VERB_TARGETS: Final = {
    "manage": "manageable",
    "provide": "available",
    "inspect": "manageable",
    "deploy": "active",
    "undeploy": "available",
    "clean": "manageable",
}
POWER_TARGETS: Final = {
    "power on": "power on", "power off": "power off", "rebooting": "power on",
    "soft power off": "power off", "soft rebooting": "power on",
}


class WaitFailed(ClientError):
    """A ``--wait`` ended in a failure state or ran out of time."""


def replay_supported(server: ServerRange | None) -> bool:
    """Whether the server replays creates by client token.

    The example service (apimw's IdempotencyMiddleware) is the one whose range reaches
    the etag version 1.116; OpenStack Ironic (39.0: 1.1 .. 1.115) ignores ``X-Client-Token``.
    """
    return server is not None and server.versioned and server.max_version >= ETAG_VERSION


class BaremetalClient(contextlib.AbstractContextManager["BaremetalClient"]):
    """Managers for nodes, ports, portgroups, chassis and resource classes on one endpoint.

    ``with BaremetalClient(...) as client:`` closes its connections at the end.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        version: str | None = None,
        project_id: str | None = None,
        auth_token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        http = requests.Session()
        if project_id:
            http.headers["X-Project-Id"] = project_id
        if auth_token:
            http.headers["X-Auth-Token"] = auth_token
        if username is not None and password is not None:
            http.auth = (username, password)
        try:
            self.session = VersionedSession(
                endpoint, service_type=SERVICE_TYPE, max_version=CLIENT_MAX, min_version="1.1",
                version=version, legacy_header=LEGACY_HEADER, session=http, timeout=timeout,
            )
        except Exception:
            http.close()
            raise
        self._http = http
        self.api = ResourceClient(self.session, retry=retry, replay=replay_supported)
        node_ignore = ("etag", "updated_at", "driver_internal_info", "provision_updated_at")
        self.nodes: ResourceManager[Resource] = ResourceManager(
            self.api, "/v1/nodes", "nodes", kind="node", etag_version=ETAG_VERSION, diff_ignore=node_ignore)
        self.ports: ResourceManager[Resource] = ResourceManager(
            self.api, "/v1/ports", "ports", kind="port", etag_version=ETAG_VERSION)
        self.portgroups: ResourceManager[Resource] = ResourceManager(
            self.api, "/v1/portgroups", "portgroups", kind="portgroup", etag_version=ETAG_VERSION,
            min_version="1.23")
        self.chassis: ResourceManager[Resource] = ResourceManager(
            self.api, "/v1/chassis", "chassis", kind="chassis", etag_version=ETAG_VERSION)
        self.resource_classes: ResourceManager[Resource] = ResourceManager(
            self.api, "/v1/resource_classes", "resource_classes", kind="resource class", id_field="name",
            min_version="1.117")

    def close(self) -> None:
        self.session.close()
        self._http.close()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- node actions -----------------------------------------------------------------

    def provision(self, node: str, verb: str, *, clean_steps: list[Any] | None = None) -> None:
        """``PUT /v1/nodes/{node}/states/provision``; ``deploy``/``undeploy`` become
        ``active``/``deleted`` below 1.73 (the verbs' version)."""
        target = verb
        if verb in ("deploy", "undeploy") and self.api.version() < DEPLOY_VERBS_VERSION:
            target = "active" if verb == "deploy" else "deleted"
        body: dict[str, Any] = {"target": target}
        if clean_steps is not None:
            body["clean_steps"] = clean_steps
        self.nodes.action(node, "states/provision", json=body)

    def power(self, node: str, target: str, *, timeout: int | None = None) -> None:
        body: dict[str, Any] = {"target": target}
        if timeout is not None:
            body["timeout"] = timeout
        self.nodes.action(node, "states/power", json=body)

    def maintenance(self, node: str, on: bool, *, reason: str | None = None) -> None:
        if on:
            self.nodes.action(node, "maintenance", json={"reason": reason} if reason else {})
        else:
            self.nodes.action(node, "maintenance", method="DELETE")

    def states(self, node: str) -> dict[str, Any]:
        doc = self.nodes.action(node, "states", method="GET")
        return doc if isinstance(doc, dict) else {}

    def wait_for(
        self,
        node: str,
        *,
        field: str,
        expected: str,
        target_field: str,
        timeout: float,
        progress: Progress | None = None,
        interval: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> dict[str, Any]:
        """Poll ``GET .../states`` until *field* is *expected* with no target left; a state
        ending in ``failed`` or ``error`` (or a stop elsewhere with ``last_error``) is a
        :class:`WaitFailed`, and so is running out of *timeout* seconds."""
        deadline = clock() + timeout
        while True:
            states = self.states(node)
            state, target = states.get(field), states.get(target_field)
            if progress is not None:
                progress.update(state, target)
            if state == expected and not target:
                return states
            if isinstance(state, str) and (state.endswith("failed") or state == "error") and not target:
                raise WaitFailed(f"node {node} ended in {state!r} instead of {expected!r}: "
                                 f"{states.get('last_error') or 'no error recorded'}")
            if not target and states.get("last_error") and state != expected:
                raise WaitFailed(f"node {node} stopped in {state!r} instead of {expected!r}: "
                                 f"{states['last_error']}")
            if clock() >= deadline:
                raise WaitFailed(f"timed out after {timeout:g} s waiting for node {node} to reach "
                                 f"{expected!r} (now {state!r}, target {target!r})")
            time.sleep(interval)


class Progress:
    """A one-line progress indicator on *stream*: the states a node passes through and the
    time spent; redrawn in place on a terminal, one line per change otherwise."""

    SPINNER: Final = "|/-\\"

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.last: tuple[Any, Any] | None = None
        self.ticks = 0

    def update(self, state: Any, target: Any) -> None:
        elapsed = time.monotonic() - self.start
        shown = f"{state}" + (f" -> {target}" if target else "")
        if self.tty:
            self.ticks += 1
            spin = self.SPINNER[self.ticks % len(self.SPINNER)]
            self.stream.write(f"\r{spin} {self.label}: {shown} ({elapsed:.1f} s)\x1b[K")
            self.stream.flush()
        elif (state, target) != self.last:
            self.stream.write(f"{self.label}: {shown} ({elapsed:.1f} s)\n")
            self.stream.flush()
        self.last = (state, target)

    def done(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
