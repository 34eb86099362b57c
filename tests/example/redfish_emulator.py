"""A real Redfish BMC for the tests: sushy-tools' ``sushy-emulator`` on loopback.

:class:`RedfishEmulator` starts ``sushy-emulator`` (the ``sushy-tools`` package)
on 127.0.0.1 and a free port with its *fake* system driver
(``SUSHY_EMULATOR_FAKE_DRIVER = True``): in-memory systems whose power changes
apply 1-11 s after the reset request, as a real BMC's do.  HTTP basic auth is on
(a bcrypt htpasswd file, the only digest the emulator accepts), so wrong
credentials can be tested; the emulator's external notifications are off for
every system (no traffic beyond loopback); its state lives in the private work
directory (not the shared ``/tmp/sushy-emulator``).  Start and stop are bounded
(:class:`tests.servers.Server`).

Each test gets its own system (:meth:`RedfishEmulator.system_id`), so tests never
see each other's power state.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import socket
import sys
import time
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import requests

from tests.servers import HOST, Server, free_port, make_workdir

__all__ = [
    "PASSWORD",
    "SYSTEMS",
    "USERNAME",
    "RedfishEmulator",
    "closed_port_address",
    "serve",
    "silent_bmc",
    "start_of_second",
    "wait_for_power",
]

USERNAME = "admin"
PASSWORD = "s3cret-Redfish-pw"  # noqa: S105 - a test credential for a loopback emulator
#: How many fake systems the emulator serves (one per test that changes power).
SYSTEMS = 48


def _command() -> list[str]:
    """``sushy-emulator`` of this interpreter (``python -m``: no PATH or shim involved)."""
    if importlib.util.find_spec("sushy_tools") is None:  # pragma: no cover - the test extra has it
        raise RuntimeError("sushy-tools is not installed; pip install -e '.[test]'")
    return [sys.executable, "-m", "sushy_tools.emulator.main"]


def _self_signed_certificate(workdir: Path) -> Path:
    """A CA:TRUE self-signed certificate for 127.0.0.1 (cert.pem) and its key (key.pem)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sushy-emulator test BMC")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    (workdir / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    path = workdir / "cert.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


class RedfishEmulator(Server):
    """``sushy-emulator --config <file>`` with fake systems, basic auth, no notifications."""

    def __init__(self, workdir: Path, *, systems: int = SYSTEMS, tls: bool = False) -> None:
        super().__init__("sushy-emulator", free_port(), workdir)
        #: with *tls*: the emulator's self-signed certificate (its own CA) for redfish_verify_ca
        self.ca_file: Path | None = _self_signed_certificate(workdir) if tls else None
        self.systems = [
            {
                "uuid": str(uuidlib.uuid4()),
                "name": f"fake-{i}",
                "power_state": "Off",
                "external_notifier": False,
                "nics": [{"mac": f"52:54:00:00:{i // 256:02x}:{i % 256:02x}", "ip": f"10.0.0.{i + 1}"}],
            }
            for i in range(systems)
        ]
        self._next = 0
        self.config_file = workdir / "emulator.conf"
        self.auth_file = workdir / "htpasswd"
        digest = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        self.auth_file.write_text(f"{USERNAME}:{digest}\n")
        config: dict[str, Any] = {
            "SUSHY_EMULATOR_LISTEN_IP": HOST,
            "SUSHY_EMULATOR_LISTEN_PORT": self.port,
            "SUSHY_EMULATOR_FAKE_DRIVER": True,
            "SUSHY_EMULATOR_FAKE_SYSTEMS": self.systems,
            "SUSHY_EMULATOR_AUTH_FILE": str(self.auth_file),
            "SUSHY_EMULATOR_STATE_DIR": str(workdir / "state"),
            # never used (every system has external_notifier False); points nowhere reachable
            "EXTERNAL_NOTIFICATION_URL": f"http://{HOST}:9/",
        }
        if self.ca_file is not None:
            config["SUSHY_EMULATOR_SSL_CERT"] = str(self.ca_file)
            config["SUSHY_EMULATOR_SSL_KEY"] = str(workdir / "key.pem")
        self.config_file.write_text("".join(f"{key} = {value!r}\n" for key, value in config.items()))

    @property
    def url(self) -> str:
        scheme = "https" if self.ca_file is not None else "http"
        return f"{scheme}://{HOST}:{self.port}"

    def command(self) -> list[str]:
        return [*_command(), "--config", str(self.config_file)]

    def ready(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=0.5):
                pass
            verify = str(self.ca_file) if self.ca_file is not None else True
            return requests.get(f"{self.url}/redfish/v1/", timeout=2, verify=verify).status_code == 200
        except (OSError, requests.RequestException):
            return False

    def system_id(self) -> str:
        """A system no other test has used yet (its UUID, the Redfish system Id)."""
        if self._next >= len(self.systems):
            raise RuntimeError(f"all {len(self.systems)} emulated systems are used; raise SYSTEMS")
        system = self.systems[self._next]
        self._next += 1
        return str(system["uuid"])

    def system_path(self, system_id: str) -> str:
        return f"/redfish/v1/Systems/{system_id}"

    # -- out-of-band access, as an operator at the BMC would ----------------------

    def _session(self) -> requests.Session:
        session = requests.Session()
        session.auth = (USERNAME, PASSWORD)
        if self.ca_file is not None:
            session.verify = str(self.ca_file)
        return session

    def power_state(self, system_id: str) -> str:
        """The system's PowerState as the BMC reports it now (``On`` / ``Off``)."""
        with self._session() as session:
            response = session.get(self.url + self.system_path(system_id), timeout=5)
            response.raise_for_status()
            return str(response.json()["PowerState"])

    def boot_override(self, system_id: str) -> dict[str, Any]:
        with self._session() as session:
            response = session.get(self.url + self.system_path(system_id), timeout=5)
            response.raise_for_status()
            return dict(response.json()["Boot"])

    def reset(self, system_id: str, reset_type: str) -> None:
        """Press the button out of band (``On``, ``ForceOff``...)."""
        with self._session() as session:
            response = session.post(
                f"{self.url}{self.system_path(system_id)}/Actions/ComputerSystem.Reset",
                json={"ResetType": reset_type},
                timeout=5,
            )
            response.raise_for_status()


@contextlib.contextmanager
def silent_bmc() -> Iterator[str]:
    """A BMC address that accepts TCP connections and never answers (a hung BMC).

    The listening socket never calls ``accept()``: the kernel completes the
    handshake from the backlog, the request is sent, no byte ever comes back, so
    only the client's read timeout ends the call.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, 0))
        sock.listen(16)
        yield f"http://{HOST}:{sock.getsockname()[1]}"
    finally:
        sock.close()


def closed_port_address() -> str:
    """A loopback address where nothing listens (an unreachable BMC: connection refused)."""
    return f"http://{HOST}:{free_port()}"


def start_of_second(before: float = 0.2, limit: float = 2.0) -> None:
    """Sleep until the wall clock is within *before* s after a whole second (bounded).

    The emulator's fake systems apply a reset at ``int(time.time()) + randint(1, 11)``,
    that is never earlier than the next whole second.  A reset sent right after a
    whole second therefore takes at least ``1 - before`` s more to apply: a power
    wait shorter than that times out deterministically.
    """
    deadline = time.monotonic() + limit
    while time.time() % 1.0 >= before:
        if time.monotonic() > deadline:  # pragma: no cover - the loop ends within 1 s
            raise RuntimeError("clock alignment did not finish")
        time.sleep(min(0.05, 1.0 - time.time() % 1.0))


def wait_for_power(emulator: RedfishEmulator, system_id: str, state: str, timeout: float = 15.0) -> None:
    """Poll the BMC (out of band) until the system reports *state* (bounded: 15 s > 11 s)."""
    deadline = time.monotonic() + timeout
    while (current := emulator.power_state(system_id)) != state:
        if time.monotonic() > deadline:
            raise AssertionError(f"system {system_id} still {current!r} after {timeout}s, wanted {state!r}")
        time.sleep(0.25)


def serve(workdir_prefix: str = "redfish", *, tls: bool = False) -> Iterator[RedfishEmulator]:
    """Start an emulator, yield it, always stop it and remove its work directory."""
    emulator = RedfishEmulator(make_workdir(workdir_prefix), tls=tls)
    try:
        emulator.start()
        yield emulator
    finally:
        emulator.stop()
        shutil.rmtree(emulator.workdir, ignore_errors=True)
