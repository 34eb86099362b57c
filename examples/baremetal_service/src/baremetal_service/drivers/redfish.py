"""``redfish``: a hardware type that drives a real BMC over DMTF Redfish (with ``sushy``).

Interfaces:

==============  ========  =================================================================
``power``       redfish   ``ComputerSystem.Reset`` (On, ForceOff, GracefulShutdown,
                          ForceRestart), then *waits* until the BMC reports the new state
``management``  redfish   boot override (``pxe`` -> Pxe, ``disk`` -> Hdd, ``cdrom`` -> Cd,
                          ``bios`` -> BiosSetup) where the BMC allows that target
``deploy``      fake      writes no image: the conductor sets PXE boot and powers on/off
                          through the real BMC (Ironic's ``fake`` deploy interface)
``inspect``     redfish   ``cpus`` / ``memory_mb`` / ``cpu_arch`` from the system's summaries
==============  ========  =================================================================

``driver_info`` uses Ironic's names: ``redfish_address`` (required; ``https://``
assumed without a scheme), ``redfish_system_id`` (a path such as
``/redfish/v1/Systems/1`` or a bare system Id; optional when the BMC has exactly
one system), ``redfish_username``, ``redfish_password`` (secret: masked by the
API, never logged, not in event payloads; etags are keyed HMACs),
``redfish_verify_ca`` (true/false or a CA bundle path), ``redfish_auth_type``
(``basic``, ``session``, ``auto``) and, beyond Ironic, ``redfish_power_timeout``.

Nothing hangs: every HTTP request has a connect and a read timeout (never longer
than the time left before the conductor's step deadline), connection failures are
not retried in a loop, and a power change is waited for at most

    the request's ``timeout`` (``PUT .../states/power``)
    > ``driver_info["redfish_power_timeout"]``
    > the hardware type's ``power_timeout`` (service configuration: ``RedfishHardware(power_timeout=...)`` or
      ``BAREMETAL_REDFISH_POWER_TIMEOUT``; default 60 s)

and never past ``task.deadline``.  Every failure is a :class:`DriverError` whose
message names the BMC address and the cause (unreachable, credentials refused,
system not found, timed out waiting for the power state) and never the password;
the conductor puts it into the node's ``last_error``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import sushy
from sushy import auth as sushy_auth
from sushy import connector as sushy_connector
from sushy import exceptions as sushy_exc

from apimw.errors import ConfigError
from baremetal_service.drivers.base import (
    POWER_OFF,
    POWER_ON,
    SOFT_POWER_OFF,
    DriverError,
    DriverValidationError,
    HardwareType,
    InspectInterface,
    Interface,
    ManagementInterface,
    PowerInterface,
    Task,
)
from baremetal_service.drivers.fake import FakeDeploy

__all__ = ["RedfishConnectionInfo", "RedfishHardware", "parse_driver_info"]

LOG = logging.getLogger(__name__)

#: Defaults of the hardware type (override per service with RedfishHardware(...)).
DEFAULT_POWER_TIMEOUT: Final = 60.0
DEFAULT_CONNECT_TIMEOUT: Final = 5.0
DEFAULT_READ_TIMEOUT: Final = 30.0
DEFAULT_POLL_INTERVAL: Final = 0.5
#: Environment variables of :meth:`RedfishHardware.from_environ` (``BAREMETAL_REDFISH_POWER_TIMEOUT``...).
ENV_PREFIX: Final = "BAREMETAL_REDFISH_"
#: A request never gets less than this, even right at the deadline (it must be able to fail cleanly).
_MIN_REQUEST_TIMEOUT: Final = 1.0
#: BMC addresses remembered as "basic auth only" (auto mode), per hardware type instance.
_MAX_REMEMBERED: Final = 4096
#: Known causes of a connection failure, found in the requests/urllib3 text -> the short reason we give.
_CONNECTION_REASONS: Final = (
    ("Connection refused", "connection refused"),
    ("timed out", "timed out"),
    ("Name or service not known", "unknown host name"),
    ("No route to host", "no route to host"),
    ("CERTIFICATE_VERIFY_FAILED", "TLS certificate verification failed"),
    ("Connection reset", "connection reset"),
)
AUTH_TYPES: Final = ("basic", "session", "auto")
_TRUE: Final = frozenset({"true", "1", "yes", "on", "y", "t"})
_FALSE: Final = frozenset({"false", "0", "no", "off", "n", "f"})

#: Our boot devices <-> Redfish BootSourceOverrideTarget (Ironic's map).
BOOT_DEVICE_MAP: Final[Mapping[str, str]] = {
    "pxe": "Pxe",
    "disk": "Hdd",
    "cdrom": "Cd",
    "bios": "BiosSetup",
}
_BOOT_DEVICE_REV: Final = {v: k for k, v in BOOT_DEVICE_MAP.items()}

#: Redfish PowerState -> ours (a transition in progress reports where it is heading).
_POWER_STATE_MAP: Final[Mapping[str, str]] = {
    "On": POWER_ON,
    "PoweringOn": POWER_ON,
    "Off": POWER_OFF,
    "PoweringOff": POWER_OFF,
}
#: Our target -> (Redfish ResetType, the state to wait for).
_RESET_MAP: Final[Mapping[str, tuple[str, str]]] = {
    POWER_ON: ("On", POWER_ON),
    POWER_OFF: ("ForceOff", POWER_OFF),
    SOFT_POWER_OFF: ("GracefulShutdown", POWER_OFF),
}

_PROPERTIES: Final[Mapping[str, str]] = {
    "redfish_address": (
        "Required. The URL address to the Redfish controller. It must include the authority "
        "portion of the URL, and can optionally include the scheme. If the scheme is missing, "
        "https is assumed. For example: https://mgmt.vendor.com."
    ),
    "redfish_system_id": (
        "The canonical path to the ComputerSystem resource that the driver will interact with "
        "(for example /redfish/v1/Systems/1), or just the system's Id. Only required if the "
        "BMC manages more than one ComputerSystem. Optional."
    ),
    "redfish_username": "User account with admin/server-profile access privilege. Optional.",
    "redfish_password": "User account password. Secret: masked in API responses. Optional.",
    "redfish_verify_ca": (
        "Either a Boolean value, a path to a CA_BUNDLE file or directory with certificates of "
        "trusted CAs. If set to True the driver will verify the host certificates; if False the "
        "driver will ignore verifying the SSL certificate. Defaults to True. Optional."
    ),
    "redfish_auth_type": "Redfish HTTP client authentication method: basic, session or auto. "
    "Defaults to auto (a session if the BMC offers one, else basic). Optional.",
    "redfish_power_timeout": "Seconds to wait for the BMC to apply a power change "
    "(default: the service's setting, 60). Optional.",
}


@dataclass(frozen=True)
class RedfishConnectionInfo:
    """A node's parsed ``driver_info``.  ``repr`` never shows the password."""

    address: str
    system_id: str | None
    username: str | None
    password: str | None
    verify_ca: bool | str
    auth_type: str
    power_timeout: float | None

    def __repr__(self) -> str:
        return (
            f"RedfishConnectionInfo(address={self.address!r}, system_id={self.system_id!r}, "
            f"username={self.username!r}, password={'***' if self.password else None}, "
            f"verify_ca={self.verify_ca!r}, auth_type={self.auth_type!r})"
        )


def _as_verify(value: Any) -> bool | str:
    if value is None or value == "":
        return True
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        if os.path.exists(value):
            return value
        raise DriverValidationError(
            f"Invalid value {value!r} for redfish_verify_ca: expected a Boolean or the path of an "
            "existing CA bundle file or directory"
        )
    raise DriverValidationError(f"Invalid value type {type(value).__name__} for redfish_verify_ca")


def _as_timeout(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        timeout = float(value)
    except (TypeError, ValueError):
        raise DriverValidationError(
            f"Invalid redfish_power_timeout {value!r}: expected a number of seconds"
        ) from None
    if not 0 < timeout <= 3600:
        raise DriverValidationError(f"Invalid redfish_power_timeout {value!r}: must be in (0, 3600] seconds")
    return timeout


def parse_driver_info(driver_info: Mapping[str, Any]) -> RedfishConnectionInfo:
    """Validate and normalise a node's redfish ``driver_info`` (no network access).

    Raises :class:`DriverValidationError` naming the field at fault.
    """
    address = driver_info.get("redfish_address")
    if not address:
        raise DriverValidationError(
            "Missing the following redfish properties in node's driver_info: redfish_address"
        )
    if not isinstance(address, str):
        raise DriverValidationError("Invalid redfish_address: expected a string")
    address = address.strip()
    if "://" not in address:
        address = "https://" + address
    parsed = urllib.parse.urlsplit(address)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise DriverValidationError(
            f"Invalid Redfish address {parsed.scheme}://{parsed.hostname or ''} set in driver_info/"
            "redfish_address on node: expected http(s)://host[:port]"
        )
    if parsed.username is not None or parsed.password is not None:
        # credentials in the URL would leak into every error message and log line
        raise DriverValidationError(
            "Invalid redfish_address: put credentials in redfish_username/redfish_password, not in the URL"
        )
    try:
        parsed.port  # noqa: B018 - validates the port
    except ValueError:
        raise DriverValidationError("Invalid redfish_address: bad port number") from None
    system_id = driver_info.get("redfish_system_id") or None
    if system_id is not None:
        if not isinstance(system_id, str):
            raise DriverValidationError("Invalid redfish_system_id: expected a string")
        system_id = system_id.strip()
        if not system_id.startswith("/"):
            system_id = "/redfish/v1/Systems/" + urllib.parse.quote(system_id, safe="")
    username = driver_info.get("redfish_username") or None
    password = driver_info.get("redfish_password") or None
    for key, value in (("redfish_username", username), ("redfish_password", password)):
        if value is not None and not isinstance(value, str):
            raise DriverValidationError(f"Invalid {key}: expected a string")
    auth_type = driver_info.get("redfish_auth_type") or "auto"
    if auth_type not in AUTH_TYPES:
        raise DriverValidationError(
            f"Invalid redfish_auth_type {auth_type!r}: valid values are {', '.join(AUTH_TYPES)}"
        )
    return RedfishConnectionInfo(
        address=address.rstrip("/"),
        system_id=system_id,
        username=username,
        password=password,
        verify_ca=_as_verify(driver_info.get("redfish_verify_ca")),
        auth_type=auth_type,
        power_timeout=_as_timeout(driver_info.get("redfish_power_timeout")),
    )


def _error(info: RedfishConnectionInfo, error: Exception, doing: str) -> DriverError:
    """A DriverError with a clear cause; never includes the password."""
    where = f"the Redfish BMC at {info.address}"
    if isinstance(error, sushy_exc.AccessError):
        who = f"user {info.username!r}" if info.username else "no user name"
        text = (
            f"{where} refused the credentials ({who}; HTTP {error.status_code}) while {doing}: "
            "check redfish_username and redfish_password"
        )
    elif isinstance(error, sushy_exc.ResourceNotFoundError):
        text = f"{where}: resource not found while {doing} (check redfish_system_id): {error.message}"
    elif isinstance(error, sushy_exc.ConnectionError):
        text = f"cannot reach {where} while {doing}: {_reason(error)}"
    elif isinstance(error, sushy_exc.HTTPError):
        text = f"{where} answered HTTP {error.status_code} while {doing}: {error.message}"
    else:
        text = f"Redfish error from {where} while {doing}: {error}"
    if info.password and info.password in text:  # defence in depth: a BMC echoing it back
        text = text.replace(info.password, "***")
    return DriverError(text)


def _reason(error: sushy_exc.ConnectionError) -> str:
    """The cause of a connection failure in a few words (not a stack of urllib3 reprs)."""
    text = str(error)
    for marker, reason in _CONNECTION_REASONS:
        if marker in text:
            return reason
    return text[:300]


class RedfishClient:
    """One conversation with a node's BMC: a sushy root and the node's system."""

    def __init__(self, info: RedfishConnectionInfo, system: Any) -> None:
        self.info = info
        self.system = system

    def refresh(self) -> None:
        self.system.refresh(force=True)


class _Settings:
    """The hardware type's service-level settings, shared by its interfaces."""

    def __init__(
        self, *, power_timeout: float, connect_timeout: float, read_timeout: float, poll_interval: float
    ) -> None:
        for name, value in (
            ("power_timeout", power_timeout),
            ("connect_timeout", connect_timeout),
            ("read_timeout", read_timeout),
            ("poll_interval", poll_interval),
        ):
            if not value > 0:
                raise ConfigError(f"redfish {name} must be a positive number of seconds, got {value!r}")
        self.power_timeout = power_timeout
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.poll_interval = poll_interval
        self._lock = threading.Lock()
        self._basic_addresses: set[str] = set()

    def _basic_only(self, address: str) -> bool:
        with self._lock:
            return address in self._basic_addresses

    def _remember_basic_only(self, address: str) -> None:
        with self._lock:
            if len(self._basic_addresses) >= _MAX_REMEMBERED:
                self._basic_addresses.clear()
            self._basic_addresses.add(address)

    @contextmanager
    def client(self, task: Task, doing: str) -> Iterator[RedfishClient]:
        """Connect to the node's BMC and fetch its system; every failure is a DriverError."""
        info = parse_driver_info(task.driver_info)
        remaining = task.remaining()
        read_timeout = max(_MIN_REQUEST_TIMEOUT, min(self.read_timeout, remaining))
        connect_timeout = max(_MIN_REQUEST_TIMEOUT, min(self.connect_timeout, remaining))
        conn = sushy_connector.Connector(
            info.address,
            verify=info.verify_ca,
            # one attempt per request (a 5xx GET is retried once, after 0.5 s): an unreachable
            # BMC fails in connect_timeout, not after sushy's default 10 x 3 s of retries
            server_side_retries=1,
            server_side_retries_delay=0.5,
            default_request_timeout=read_timeout,
            connect_timeout=connect_timeout,
        )
        auto = info.auth_type == "auto"
        if info.auth_type == "basic" or (auto and self._basic_only(info.address)):
            auth: sushy_auth.AuthBase = sushy_auth.BasicAuth(info.username, info.password)
        elif info.auth_type == "session":
            auth = sushy_auth.SessionAuth(info.username, info.password)
        else:
            auth = sushy_auth.SessionOrBasicAuth(info.username, info.password)
        try:
            try:
                root = sushy.Sushy(info.address, auth=auth, connector=conn, verify=info.verify_ca)
                system_id = info.system_id
                if system_id is None:  # the BMC's only system (listed without fetching each member)
                    members = list(root.get_system_collection().members_identities)
                    if len(members) != 1:
                        raise DriverError(
                            f"the Redfish BMC at {info.address} manages {len(members)} systems: "
                            "set redfish_system_id to choose one"
                        )
                    system_id = members[0]
                system = root.get_system(system_id)
            except sushy_exc.SushyError as error:
                raise _error(info, error, f"{doing} (connecting)") from None
            if isinstance(auth, sushy_auth.SessionOrBasicAuth) and not auth.can_refresh_session():
                # "auto" fell back to basic auth on this BMC: go straight to basic next time
                # (no failed session request and its sushy warnings on every call)
                self._remember_basic_only(info.address)
            client = RedfishClient(info, system)
            try:
                yield client
            except sushy_exc.SushyError as error:
                raise _error(info, error, doing) from None
        finally:
            try:
                auth.close()  # ends a Redfish session, if one was opened
            except Exception as error:  # noqa: BLE001 - closing must not mask the real outcome
                LOG.debug("ignoring error closing the Redfish session with %s: %s", info.address, type(error))
            conn.close()


def _settled(client: RedfishClient, target: str) -> bool:
    """The BMC reports *target* and no transition in progress (not ``PoweringOn``...)."""
    raw = client.system.power_state
    return _power_state_of(client) == target and str(getattr(raw, "value", raw)) in ("On", "Off")


def _power_state_of(client: RedfishClient) -> str:
    raw = client.system.power_state
    value = getattr(raw, "value", raw)
    state = _POWER_STATE_MAP.get(str(value)) if value is not None else None
    if state is None:
        raise DriverError(
            f"the Redfish BMC at {client.info.address} reported an unknown power state {value!r}"
        )
    return state


class _RedfishInterface(Interface):
    """What the Redfish interfaces share: the hardware type's settings, and the check of the
    node's driver_info (the BMC address and credentials)."""

    name = "redfish"

    def __init__(self, settings: _Settings) -> None:
        self._settings = settings

    def validate(self, task: Task) -> None:
        parse_driver_info(task.driver_info)


class RedfishPower(_RedfishInterface, PowerInterface):
    def get_power_state(self, task: Task) -> str:
        with self._settings.client(task, "getting the power state") as client:
            return _power_state_of(client)

    def _timeout(self, task: Task, info: RedfishConnectionInfo, timeout: float | None) -> float:
        if timeout is not None and timeout > 0:
            chosen = float(timeout)
        elif info.power_timeout is not None:
            chosen = info.power_timeout
        else:
            chosen = self._settings.power_timeout
        return min(chosen, task.remaining())

    def _wait(self, task: Task, client: RedfishClient, target: str, timeout: float, started: float) -> None:
        """Poll the BMC until it reports *target*, for at most *timeout* seconds from *started*."""
        deadline = started + timeout
        while True:
            client.refresh()
            if _settled(client, target):
                return
            last = _power_state_of(client)
            now = time.monotonic()
            if now >= deadline:
                raise DriverError(
                    f"Timed out after {timeout:g} s waiting for the Redfish BMC at {client.info.address} to "
                    f"report power state {target!r} (it still reports {last!r}); the request was sent "
                    "and the node may still change state"
                )
            time.sleep(min(self._settings.poll_interval, max(0.0, deadline - now)))

    def _reset(self, client: RedfishClient, reset_type: str) -> None:
        allowed = {getattr(v, "value", v) for v in client.system.get_allowed_reset_system_values()}
        if reset_type not in allowed:
            raise DriverError(
                f"the Redfish BMC at {client.info.address} does not allow the reset {reset_type!r} "
                f"(allowed: {', '.join(sorted(map(str, allowed)))})"
            )
        client.system.reset_system(sushy.ResetType(reset_type))

    def set_power_state(self, task: Task, state: str, timeout: float | None = None) -> None:
        if state not in _RESET_MAP:
            raise DriverError(f"Unsupported power state {state!r} for the redfish power interface")
        reset_type, target = _RESET_MAP[state]
        started = time.monotonic()
        with self._settings.client(task, f"setting the power state to {state!r}") as client:
            wait = self._timeout(task, client.info, timeout)
            if _settled(client, target):
                LOG.info("node %s is already in power state %r", task.uuid, target)
                return
            if _power_state_of(client) == target:  # PoweringOn/PoweringOff: already heading there
                LOG.info(
                    "node %s is already changing to power state %r; waiting up to %g s",
                    task.uuid,
                    target,
                    wait,
                )
            else:
                self._reset(client, reset_type)
                LOG.info(
                    "node %s: requested Redfish reset %s; waiting up to %g s", task.uuid, reset_type, wait
                )
            self._wait(task, client, target, wait, started)
            LOG.info("node %s: power state is now %r", task.uuid, target)

    def reboot(self, task: Task, timeout: float | None = None) -> None:
        started = time.monotonic()
        with self._settings.client(task, "rebooting") as client:
            wait = self._timeout(task, client.info, timeout)
            if _power_state_of(client) == POWER_ON:
                self._reset(client, "ForceRestart")
            else:
                self._reset(client, "On")
            LOG.info("node %s: requested a Redfish reboot; waiting up to %g s", task.uuid, wait)
            self._wait(task, client, POWER_ON, wait, started)


class RedfishManagement(_RedfishInterface, ManagementInterface):
    @staticmethod
    def _allowed(client: RedfishClient) -> list[str]:
        values = {getattr(v, "value", v) for v in client.system.get_allowed_system_boot_source_values()}
        return [device for device, target in BOOT_DEVICE_MAP.items() if target in values]

    def get_supported_boot_devices(self, task: Task) -> list[str]:
        with self._settings.client(task, "getting the supported boot devices") as client:
            return self._allowed(client)

    def set_boot_device(self, task: Task, device: str, persistent: bool = False) -> None:
        with self._settings.client(task, f"setting the boot device to {device!r}") as client:
            allowed = self._allowed(client)
            if device not in allowed:
                raise DriverError(
                    f"the Redfish BMC at {client.info.address} cannot boot from {device!r} "
                    f"(supported: {', '.join(allowed) or 'none'})"
                )
            enabled = sushy.BOOT_SOURCE_ENABLED_CONTINUOUS if persistent else sushy.BOOT_SOURCE_ENABLED_ONCE
            client.system.set_system_boot_options(
                target=sushy.BootSource(BOOT_DEVICE_MAP[device]), enabled=enabled
            )
            LOG.info("node %s: boot device %s (persistent=%s)", task.uuid, device, persistent)

    def get_boot_device(self, task: Task) -> dict[str, Any]:
        with self._settings.client(task, "getting the boot device") as client:
            boot = client.system.boot
            target = getattr(boot.target, "value", boot.target)
            enabled = getattr(boot.enabled, "value", boot.enabled)
            return {
                "boot_device": _BOOT_DEVICE_REV.get(str(target)) if target else None,
                "persistent": {"Continuous": True, "Once": False}.get(str(enabled)),
            }


class RedfishInspect(_RedfishInterface, InspectInterface):
    def inspect(self, task: Task) -> dict[str, Any]:
        found: dict[str, Any] = {}
        with self._settings.client(task, "inspecting") as client:
            memory = client.system.memory_summary
            if memory is not None and memory.size_gib:
                found["memory_mb"] = int(memory.size_gib * 1024)
            try:
                summary = client.system.processors.summary
            except (sushy_exc.MissingAttributeError, sushy_exc.ResourceNotFoundError):
                summary = None
            if summary is not None:
                if summary.count:
                    found["cpus"] = int(summary.count)
                arch = getattr(summary.architecture, "value", summary.architecture)
                if arch:
                    found["cpu_arch"] = {"x86": "x86_64", "ARM": "aarch64"}.get(str(arch), str(arch))
        return found


class RedfishHardware(HardwareType):
    """The ``redfish`` hardware type.  Registered under ``baremetal_service.hardware_types``.

    ``RedfishHardware(power_timeout=60, connect_timeout=5, read_timeout=30,
    poll_interval=0.5)``: the service-level settings, in seconds.  Either pass an
    instance to ``DriverRegistry(extra=...)`` / ``BaremetalService(extra_hardware_types=...)``,
    or enable ``redfish`` by name: the entry point builds it with
    :meth:`from_environ` (``BAREMETAL_REDFISH_POWER_TIMEOUT``, ``..._CONNECT_TIMEOUT``,
    ``..._READ_TIMEOUT``, ``..._POLL_INTERVAL``).  ``driver_info["redfish_power_timeout"]``
    overrides *power_timeout* per node.
    """

    name: ClassVar[str] = "redfish"
    description: ClassVar[str] = "Redfish: power and boot device through the node's BMC (DMTF Redfish)."
    driver_info_properties: ClassVar[Mapping[str, str]] = _PROPERTIES
    secret_fields: ClassVar[frozenset[str]] = frozenset({"redfish_password"})

    def __init__(
        self,
        *,
        power_timeout: float = DEFAULT_POWER_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> None:
        self.settings = _Settings(
            power_timeout=power_timeout,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            poll_interval=poll_interval,
        )
        self.power = RedfishPower(self.settings)
        self.management = RedfishManagement(self.settings)
        # Writes no image (Ironic's ``fake`` deploy); power and boot go through the real BMC.
        self.deploy = FakeDeploy()
        self.inspect = RedfishInspect(self.settings)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RedfishHardware:
        """The hardware type with settings from ``BAREMETAL_REDFISH_*`` variables (defaults otherwise)."""
        env = os.environ if environ is None else environ
        settings: dict[str, float] = {}
        for name in ("power_timeout", "connect_timeout", "read_timeout", "poll_interval"):
            variable = ENV_PREFIX + name.upper()
            raw = env.get(variable)
            if raw is None or raw.strip() == "":
                continue
            try:
                settings[name] = float(raw)
            except ValueError:
                raise ConfigError(f"{variable}={raw!r}: expected a number of seconds") from None
        return cls(**settings)

    def validate_driver_info(self, task: Task) -> None:
        super().validate_driver_info(task)
        parse_driver_info(task.driver_info)
