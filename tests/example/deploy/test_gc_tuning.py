"""The serving process's garbage collector (baremetal_service.deploy.tune_gc), applied once the
application is built, whatever the server.

Each check runs in a fresh interpreter: freezing and thresholds are process-wide.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: Builds the service in-process on SQLite, seeds 100 nodes, tunes the collector ("tuned") or leaves
#: the interpreter's settings ("default"), then counts the
#: collector's passes over 20 GET /v1/nodes/detail requests.
PROBE = r"""
import gc, io, json, sys
from baremetal_service.deploy import build_app, tune_gc

def call(app, method, path, body=b""):
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
           "SERVER_PORT": "6385", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
           "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)), "wsgi.errors": sys.stderr,
           "wsgi.version": (1, 0), "wsgi.multithread": True, "wsgi.multiprocess": False,
           "wsgi.run_once": False, "HTTP_X_OPENSTACK_IRONIC_API_VERSION": "latest",
           "CONTENT_TYPE": "application/json"}
    status = []
    out = b"".join(app(env, lambda s, h, e=None: status.append(s)))
    assert status[0][:3] in ("200", "201"), (status, out[:200])
    return out

app = build_app(database_url="sqlite:///" + sys.argv[2], store_url="memory://", run_conductor=False)
for i in range(100):
    call(app, "POST", "/v1/nodes", json.dumps({"driver": "fake-hardware", "name": f"n{i}"}).encode())
if sys.argv[1] == "tuned":
    tune_gc()
passes = [0, 0, 0]
gc.callbacks.append(lambda phase, info: phase == "start" and passes.__setitem__(
    info["generation"], passes[info["generation"]] + 1))
for _ in range(20):
    assert len(json.loads(call(app, "GET", "/v1/nodes/detail"))["nodes"]) == 100
app.close()
print(json.dumps({"passes": passes, "threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def _probe(mode: str, tmp_path: Path) -> dict[str, object]:
    done = subprocess.run(  # noqa: S603 - our own probe
        [sys.executable, "-c", PROBE, mode, str(tmp_path / f"{mode}.db")],
        capture_output=True, text=True, timeout=300, env={**os.environ},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_tuned_collector_skips_the_passes_a_detail_request_used_to_pay_for(tmp_path: Path) -> None:
    default = _probe("default", tmp_path)
    tuned = _probe("tuned", tmp_path)
    assert default["frozen"] == 0
    assert tuned["frozen"] > 10_000  # the started application's objects
    assert list(tuned["threshold"])[0] == 10_000  # type: ignore[call-overload]
    # the default collector ran young passes all through the requests; tuned almost none
    default_passes, tuned_passes = sum(default["passes"]), sum(tuned["passes"])  # type: ignore[arg-type]
    assert default_passes >= 20, default
    assert tuned_passes * 10 <= default_passes, (tuned, default)


def test_the_wsgi_entry_point_tunes_the_collector_once_built(tmp_path: Path) -> None:
    # gunicorn's workers load deploy.application; the CLI (waitress, granian) tunes after building too
    code = (
        "import gc, json; from baremetal_service import deploy; before = gc.get_freeze_count(); "
        "app = deploy.application; "
        "print(json.dumps([before, gc.get_freeze_count(), gc.get_threshold()[0]])); "
        "deploy.close_application()"
    )
    env = {**os.environ, "BAREMETAL_DATABASE": f"sqlite:///{tmp_path / 'w.db'}",
           "BAREMETAL_CONDUCTOR_WORKERS": "0"}  # fmt: skip
    done = subprocess.run(  # noqa: S603 - our own module
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    before, frozen, threshold = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == 0 and frozen > 10_000
    assert threshold == 10_000
