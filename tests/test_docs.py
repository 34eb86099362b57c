"""Every ```python and ```ini sample of README.md, docs/*.md and docs/example/*.md runs as written.

The samples of one page run in document order, in one fresh directory (a reader's
working directory): each ``python`` block is executed in a namespace of its own, each
``ini`` block is written to a file there and loaded with ``paste.deploy.loadapp``.
A block is skipped only when the page itself marks it, visibly, on the line before its fence:

    **Fragment:** why it cannot run on its own.

Nothing in a sample is changed: the files it names are in the repository or made by an
earlier sample of its page. The pages send readers to nothing outside the repository.

Also here: every documented pipeline (ini pipelines and the ``a -> b -> c`` diagrams of
the docs, the example service's api-paste.ini and deploy.py) has the one order of README's
"Pipeline order", the README's paste sample serves as the README says, and a Flask app
wrapped with ``wrap_flask`` in the documented order answers like the paste pipeline.
"""

from __future__ import annotations

import base64
import configparser
import gc
import io
import json
import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from webob import Request

from apimw.errors import ConfigError
from tests.wsgi import run

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: the repository's README, the package index's page (pyproject's readme), the guides
PAGES = [
    ROOT / "README.md",
    ROOT / "README-pypi.md",
    *sorted(DOCS.glob("*.md")),
    *sorted(DOCS.glob("example/*.md")),
]
SERVICE = ROOT / "examples" / "baremetal_service" / "src" / "baremetal_service"
SHIPPED_INI = SERVICE / "api-paste.ini"

_FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")
_FRAGMENT = re.compile(r"^\*\*Fragment:\*\*\s+\S")


@dataclass
class Sample:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    fragment: bool

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def samples_of(page: Path) -> list[Sample]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Sample] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start = i
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"{page}:{start + 1}: unclosed code fence"
        fragment = bool(_FRAGMENT.match(before))
        found.append(Sample(page, start + 1, match.group(1), "\n".join(body) + "\n", fragment))
        i += 1
    return found


def _runnable(page: Path) -> list[Sample]:
    return [s for s in samples_of(page) if s.lang in ("python", "ini")]


# -- running and loading ----------------------------------------------------------------------


def _closables(root: Any) -> list[Any]:
    """Everything with close() in a WSGI stack (middlewares hold stores, the service its threads)."""
    found: list[Any] = []
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if obj is None or id(obj) in seen or isinstance(obj, (str, bytes, int, float, dict, list)):
            continue
        seen.add(id(obj))
        if callable(getattr(obj, "close", None)) and not isinstance(obj, type):
            found.append(obj)
        for attr in ("app", "application", "_app", "wsgi", "pipeline", "inner", "wsgi_app", "__self__"):
            todo.append(getattr(obj, attr, None))
    return found


def close_all(*roots: Any) -> None:
    done: set[int] = set()
    for root in roots:
        for obj in _closables(root):
            if id(obj) not in done:
                done.add(id(obj))
                obj.close()


def _htpasswd(path: Path) -> Path:
    path.write_text(f"alice:{bcrypt.hashpw(b'alice-password', bcrypt.gensalt(rounds=4)).decode()}\n")
    return path


def write_ini(sample: Sample, directory: Path) -> Path:
    path = directory / f"{sample.page.stem}-{sample.line}.ini"
    path.write_text(sample.text)
    return path


def load_ini(path: Path) -> Any:
    from paste.deploy import loadapp

    return loadapp(f"config:{path}")


def run_python(sample: Sample) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "doc_sample"}
    exec(compile(sample.text, sample.where, "exec"), namespace)  # noqa: S102 - the docs' own samples
    return namespace


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_sample_of_the_page_runs_as_written(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for sample in _runnable(page):
        if sample.fragment:
            continue
        if sample.lang == "python":
            namespace = run_python(sample)
            close_all(*[v for k, v in namespace.items() if not k.startswith("__")])
        else:
            assert "[pipeline:" in sample.text or "[app:" in sample.text, (
                f"{sample.where}: a paste sample needs a pipeline or an app to load "
                "(or a **Fragment:** line before it)"
            )
            app = load_ini(write_ini(sample, tmp_path))
            try:
                assert callable(app)
            finally:
                close_all(app)
    gc.collect()


def test_fragments_are_few_and_say_why() -> None:
    fragments = [s for page in PAGES for s in _runnable(page) if s.fragment]
    assert len(fragments) <= 7, [s.where for s in fragments]
    for sample in fragments:
        lines = sample.page.read_text(encoding="utf-8").splitlines()
        marker = next(x for x in reversed(lines[: sample.line - 1]) if x.strip())
        assert len(marker.split(":", 1)[1].split()) >= 3, f"{sample.where}: say why it is a fragment"


def test_no_page_hides_a_fragment_marker() -> None:
    """An HTML comment does not show on the rendered page: a reader would run the block."""
    for page in PAGES:
        assert "<!-- fragment" not in page.read_text(encoding="utf-8").lower(), page


def test_the_pages_have_samples() -> None:
    """The extraction itself: the samples this file is about are found, with their languages."""
    readme = _runnable(ROOT / "README.md")
    assert [s.lang for s in readme] == ["python", "python", "ini", "python"]
    assert not any(s.fragment for s in readme)
    assert sum(1 for page in PAGES for s in _runnable(page) if s.lang == "ini") >= 6


# -- the one pipeline order ------------------------------------------------------------------

#: role -> rank: healthcheck, request_id, microversion, auth, idempotency, etag
_RANK = {"healthcheck": 0, "request_id": 1, "microversion": 2, "auth": 3, "idempotency": 4, "etag": 5}


def _role(section: configparser.SectionProxy) -> str | None:
    how = (section.get("use") or section.get("paste.filter_factory") or "").strip()
    for needle, role in (
        ("baremetal_service.health", "healthcheck"),
        ("request_id", "request_id"), ("RequestId", "request_id"),
        ("apimw#microversion", "microversion"),
        ("keystonemiddleware", "auth"), ("baremetal_service.auth", "auth"), ("noauth", "auth"),
        ("baremetal_service.keystone", "auth"),
        ("apimw#idempotency", "idempotency"),
        ("apimw#etag", "etag"),
    ):  # fmt: skip
        if needle in how:
            return role
    return None


def pipeline_roles(ini_text: str) -> list[str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(ini_text)
    roles: list[str] = []
    for section in parser.sections():
        if not section.startswith("pipeline:"):
            continue
        for name in parser[section]["pipeline"].split()[:-1]:
            role = _role(parser[f"filter:{name}"])
            assert role is not None, f"unknown filter {name!r}"
            roles.append(role)
    return roles


def _in_order(roles: list[str]) -> bool:
    ranks = [_RANK[r] for r in roles]
    return ranks == sorted(ranks)


def _ini_sources() -> list[tuple[str, str]]:
    found = [(s.where, s.text) for page in PAGES for s in samples_of(page) if s.lang == "ini"]
    return [*found, (str(SHIPPED_INI.relative_to(ROOT)), SHIPPED_INI.read_text())]


@pytest.mark.parametrize("where_text", _ini_sources(), ids=lambda wt: wt[0])
def test_every_paste_pipeline_has_the_documented_order(where_text: tuple[str, str]) -> None:
    where, text = where_text
    if "[pipeline:" not in text:
        pytest.skip(f"{where}: no pipeline")
    roles = pipeline_roles(text)
    assert "microversion" in roles or "etag" in roles or "idempotency" in roles
    assert _in_order(roles), f"{where}: {roles}"


_WORDS = re.compile(
    r"\b(healthcheck|request_id|microversion|auth_token|authtoken|http_basic|noauth|auth|idempotency|etag)\b"
)
_WORD_ROLE = {"auth_token": "auth", "authtoken": "auth", "http_basic": "auth", "noauth": "auth"}


def _diagrams() -> list[tuple[str, str]]:
    """Arrowed order diagrams: fenced text blocks and prose lines with -> or →."""
    out: list[tuple[str, str]] = []
    for page in PAGES:
        for sample in samples_of(page):
            if sample.lang in ("", "text") and ("->" in sample.text or "→" in sample.text):
                out.append((sample.where, sample.text))
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if "→" in line or "->" in line:
                out.append((f"{page.relative_to(ROOT)}:{number}", line))
    for source in (SHIPPED_INI, SERVICE / "deploy.py", SERVICE / "health.py"):
        text = source.read_text()
        for number, line in enumerate(text.splitlines(), 1):
            if ("->" in line or "pipeline =" in line) and ("microversion" in line or "request_id" in line):
                out.append((f"{source.relative_to(ROOT)}:{number}", line))
        if source.name == "deploy.py":
            diagram = [x for x in text.split('"""')[1].splitlines() if x.startswith("    ")]
            out.append((f"{source.relative_to(ROOT)} docstring", "\n".join(diagram)))
    return out


def test_every_order_diagram_has_the_documented_order() -> None:
    checked = 0
    for where, text in _diagrams():
        roles = [_WORD_ROLE.get(w, w) for w in _WORDS.findall(text)]
        # collapse repeats ("auth_token ... noauth" are both the auth step)
        collapsed = [r for i, r in enumerate(roles) if i == 0 or roles[i - 1] != r]
        if len({*collapsed} - {"healthcheck"}) < 3:
            continue
        checked += 1
        assert _in_order(collapsed), f"{where}: {collapsed}"
    assert checked >= 6


# -- the README's samples answer a request, one per door -----------------------------------------


def _readme_sample(needle: str) -> Sample:
    (sample,) = [s for s in _runnable(ROOT / "README.md") if needle in s.text]
    return sample


def test_readme_plain_wsgi_sample_serves_the_negotiated_version() -> None:
    app = run_python(_readme_sample("def app(environ"))["app"]
    resp = run(app, Request.blank("/", headers={"OpenStack-API-Version": "baremetal 1.5"}))
    assert resp.status_int == 200 and resp.text == "served at 1.5\n"
    assert run(app, Request.blank("/", headers={"OpenStack-API-Version": "baremetal 2.0"})).status_int == 406


def test_readme_flask_sample_serves_through_the_three_middlewares() -> None:
    app = run_python(_readme_sample("Flask(__name__)"))["app"]
    try:
        v15 = {"OpenStack-API-Version": "baremetal 1.5"}
        resp = run(app.wsgi_app, Request.blank("/v1/nodes", headers=v15))
        assert resp.status_int == 200 and resp.json == {"nodes": []}
        assert resp.headers["OpenStack-API-Version"] == "baremetal 1.5"
    finally:
        close_all(app.wsgi_app)


def test_readme_paste_sample_serves_and_replays_a_client_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = load_ini(write_ini(_readme_sample("[pipeline:main]"), tmp_path))
    try:
        latest = {"X-OpenStack-Ironic-API-Version": "latest"}
        assert run(app, Request.blank("/v1/nodes", headers=latest)).json == {"nodes": []}
        create = {"method": "POST", "json": {"driver": "fake-hardware"},
                  "headers": {**latest, "X-Client-Token": uuid.uuid4().hex}}  # fmt: skip
        first, again = (run(app, Request.blank("/v1/nodes", **create)) for _ in range(2))
        assert (first.status_int, again.status_int) == (201, 201), first.text
        assert again.json["uuid"] == first.json["uuid"] and again.headers["Idempotent-Replayed"] == "true"
    finally:
        close_all(app)


def test_readme_fastapi_sample_serves_the_negotiated_version() -> None:
    import asyncio

    import httpx

    app = run_python(_readme_sample("FastAPI()"))["app"]

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            return await client.get("/v1/nodes", headers={"OpenStack-API-Version": "baremetal 1.5"})

    resp = asyncio.run(ask())
    assert resp.status_code == 200 and resp.json() == {"nodes": [], "served": "1.5"}  # what the README says


def test_readme_ironic_hook_sample_names_the_hook_entry_points() -> None:
    """The README's ironic.conf lines name the entry points apimw declares for Ironic's hook, first
    name innermost, and the groups the hooks read."""
    from importlib.metadata import entry_points

    (conf,) = [s.text for s in samples_of(ROOT / "README.md") if s.lang == "conf"]
    (line,) = [x for x in conf.splitlines() if x.startswith("middleware = ")]
    names = line.split("=", 1)[1].strip().split(",")
    assert names == ["apimw_etag", "apimw_idempotency", "apimw_microversion"]
    declared = {e.name for e in entry_points(group="ironic.api.middleware")}
    assert set(names) <= declared
    assert all(f"[{name}]" in conf for name in names)


# -- docs/paste.md's pipeline with authentication serves as the page says -------------------------


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_paste_page_pipeline_serves_client_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    page = _runnable(DOCS / "paste.md")
    setup = next(s for s in page if s.lang == "python" and "htpasswd" in s.text)
    ini = next(s for s in page if s.lang == "ini")
    run_python(setup)
    assert (tmp_path / "htpasswd").exists()
    path = write_ini(ini, tmp_path)
    assert "%(here)s/htpasswd" in path.read_text()  # the sample's own user file, not a substitute
    app = load_ini(path)
    try:
        # the health check needs no credentials (it sits in front of http_basic)
        health = run(app, Request.blank("/healthcheck", headers={"Accept": "application/json"}))
        assert health.status_int == 200, health.text
        assert health.json["reasons"] == ["database: OK; idempotency store: OK"]
        latest = {"X-OpenStack-Ironic-API-Version": "latest"}
        # no credentials: 401, after the version check (it carries the served version)
        denied = run(app, Request.blank("/v1/nodes", headers=latest))
        assert denied.status_int == 401
        assert denied.headers["X-OpenStack-Ironic-API-Version"] == "1.117"
        bad_version = run(app, Request.blank("/v1/nodes", headers={"X-OpenStack-Ironic-API-Version": "2.0"}))
        assert bad_version.status_int == 406
        # with credentials, a client token creates once and replays (no 400 "needs a project")
        token = uuid.uuid4().hex
        headers = {**latest, **_basic("alice", "alice-password"), "X-Client-Token": token}
        create = {"method": "POST", "json": {"driver": "fake-hardware"}, "headers": headers}
        answers = [run(app, Request.blank("/v1/nodes", **create)) for _ in range(2)]
        assert [a.status_int for a in answers] == [201, 201], answers[0].text
        assert answers[0].json["uuid"] == answers[1].json["uuid"]
        assert answers[1].headers["Idempotent-Replayed"] == "true"
        assert "ETag" in answers[0].headers and answers[1].headers["ETag"] == answers[0].headers["ETag"]
    finally:
        close_all(app)


# -- Flask: wrap_flask in the documented order == the paste pipeline in that order ------------

_FLASK_SETTINGS = {
    "APIMW_MICROVERSION": {"service_type": "thing", "min_version": "1.0", "max_version": "1.50"},
    "APIMW_IDEMPOTENCY": {"store": "memory://"},  # scope = project, missing_scope = reject
    "APIMW_ETAG": {"min_version": "1.40", "enforces": "PATCH"},
}
_PASTE_OF_FLASK = """
[pipeline:main]
pipeline = microversion idempotency etag things

[filter:microversion]
use = egg:apimw#microversion
service_type = thing
min_version = 1.0
max_version = 1.50

[filter:idempotency]
use = egg:apimw#idempotency
store = memory://

[filter:etag]
use = egg:apimw#etag
min_version = 1.40
enforces = PATCH

[app:things]
paste.app_factory = tests.test_docs:flask_app_factory
"""


def make_flask_app() -> Any:
    from flask import Flask, jsonify, request

    from apimw.etag import ENVIRON_IF_MATCH, mark_enforced

    app = Flask("things")
    created: list[int] = []
    etag = 'W/"' + "0" * 128 + '"'

    @app.post("/things")
    def create() -> Any:
        created.append(len(created) + 1)
        return jsonify(id=created[-1]), 201

    @app.patch("/things/1")
    def patch() -> Any:
        cond = request.environ.get(ENVIRON_IF_MATCH)
        if cond is not None:
            if not cond.matches(etag):
                return jsonify(error="stale"), 412
            mark_enforced(request.environ)
        return jsonify(id=1), 200

    return app


def flask_app_factory(global_conf: Any, **local_conf: str) -> Any:
    return make_flask_app().wsgi_app


def _scenario(app: Any) -> list[tuple[int, list[tuple[str, str]], Any]]:
    def ask(method: str, path: str, version: str, **headers: str) -> tuple[int, list[tuple[str, str]], Any]:
        body = {"name": "x"} if method != "GET" else None
        req = Request.blank(path, method=method, json=body,
                            headers={"OpenStack-API-Version": f"thing {version}", **headers})  # fmt: skip
        resp = run(app, req)
        kept = sorted((k, v) for k, v in resp.headerlist if k.lower() not in ("date", "content-length"))
        return resp.status_int, kept, json.loads(resp.body) if resp.body else None

    token = {"X-Client-Token": "tok-1"}
    return [
        ask("POST", "/things", "9.9", **token),  # the version is judged before the token's scope
        ask("POST", "/things", "1.45", **token),  # no project: the token cannot be scoped
        ask("POST", "/things", "1.45", **token, **{"X-Project-Id": "p"}),
        ask("POST", "/things", "1.45", **token, **{"X-Project-Id": "p"}),  # replay
        ask("PATCH", "/things/1", "1.30", **{"If-Match": '"x"'}),  # etag below its microversion
        ask("PATCH", "/things/1", "1.45", **{"If-Match": "junk"}),  # malformed
        ask("PATCH", "/things/1", "1.45", **{"If-Match": '"x"'}),
        ask("GET", "/things", "spam"),
    ]


def _flask_wrapped(order: tuple[str, ...]) -> Any:
    import importlib

    app = make_flask_app()
    app.config.update(_FLASK_SETTINGS)
    for name in order:
        importlib.import_module(f"apimw.{name}").wrap_flask(app)
    return app


def test_wrap_flask_in_the_documented_order_answers_like_the_paste_pipeline(tmp_path: Path) -> None:
    from apimw.etag import ETagMiddleware
    from apimw.idempotency import IdempotencyMiddleware
    from apimw.microversion import MicroversionMiddleware

    documented = _flask_wrapped(("etag", "idempotency", "microversion"))  # README: first call innermost
    outer = documented.wsgi_app
    assert isinstance(outer, MicroversionMiddleware)
    assert isinstance(outer.app, IdempotencyMiddleware)
    assert isinstance(outer.app.app, ETagMiddleware)
    ini = tmp_path / "flask.ini"
    ini.write_text(_PASTE_OF_FLASK)
    pasted = load_ini(ini)
    try:
        via_flask = _scenario(documented)
        via_paste = _scenario(pasted)
        assert via_flask == via_paste
        statuses = [status for status, _, _ in via_flask]
        assert statuses == [406, 400, 201, 201, 406, 400, 412, 400]
        assert via_flask[1][2]["errors"][0]["code"] == "idempotency.scope-missing"
        assert ("Idempotent-Replayed", "true") in via_flask[3][1]
        # the reverse order is refused when the app is wrapped: idempotency or etag outside it
        with pytest.raises(ConfigError, match="the idempotency middleware is outside the microversion"):
            _flask_wrapped(("microversion", "idempotency"))
        with pytest.raises(ConfigError, match="the etag middleware is outside the microversion"):
            _flask_wrapped(("microversion", "etag"))
    finally:
        close_all(documented.wsgi_app, pasted)


# -- the store a paste file names is the store the pipeline builds ------------------------------


def _paste_files() -> list[tuple[str, str]]:
    """Every paste ini of the docs (fragments too) and the shipped one that has an idempotency filter."""
    return [(where, text) for where, text in _ini_sources() if "egg:apimw#idempotency" in text]


def _with_redis_store(text: str, redis_url: str, directory: Path) -> str:
    """*text* with the Redis URL as its store: in ``[DEFAULT] store`` where the file keeps it there
    (the filter then says ``store = %(store)s``), else in the filter's own ``store``; a database the
    test cannot reach becomes SQLite, a user file one of the test's; ``authtoken``
    (keystonemiddleware, not installed) leaves the pipeline, whose ``noauth`` then reads the
    client's X-Project-Id."""
    parser = configparser.RawConfigParser(strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    if parser.has_option("DEFAULT", "store"):
        parser.set("DEFAULT", "store", redis_url)
    else:
        parser.set("filter:idempotency", "store", redis_url)
    if parser.has_option("DEFAULT", "database"):
        parser.set("DEFAULT", "database", f"sqlite:///{directory}/baremetal.sqlite")
    for section in parser.sections():
        if parser.has_option(section, "user_file"):  # a deployment's path: a user file of the test's
            parser.set(section, "user_file", str(_htpasswd(directory / f"htpasswd-{uuid.uuid4().hex[:6]}")))
        if section.startswith("pipeline:"):
            parser.set(section, "pipeline", parser.get(section, "pipeline").replace(" authtoken ", " "))
        if section.startswith("app:") and not parser.has_option("DEFAULT", "database"):
            parser.set(section, "database", f"sqlite:///{directory}/baremetal.sqlite")
    out = io.StringIO()
    parser.write(out)
    return out.getvalue()


@pytest.mark.parametrize("where_text", _paste_files(), ids=lambda wt: wt[0])
def test_the_store_a_paste_file_names_is_the_store_built(
    where_text: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_server: Any
) -> None:
    """``[DEFAULT] store = redis://...`` with ``store = %(store)s`` builds that Redis store, not memory://."""
    import redis

    where, text = where_text
    monkeypatch.chdir(tmp_path)
    url = f"{redis_server.url.rstrip('/').rsplit('/', 1)[0]}/9"
    client = redis.Redis.from_url(url)
    client.flushdb()
    sample = Sample(ROOT / "paste.ini", 1, "ini", _with_redis_store(text, url, tmp_path), False)
    app = load_ini(write_ini(sample, tmp_path))
    try:
        headers = {
            "X-OpenStack-Ironic-API-Version": "latest",
            "X-Project-Id": "p1",  # read by noauth (http_basic removes it and sets its own)
            "X-Client-Token": uuid.uuid4().hex,
            **_basic("alice", "alice-password"),
        }
        create = Request.blank("/v1/nodes", method="POST", json={"driver": "fake-hardware"}, headers=headers)
        resp = run(app, create)
        assert resp.status_int == 201, f"{where}: {resp.status} {resp.text}"
        assert client.dbsize() > 0, f"{where}: the client token was not stored in the Redis it names"
    finally:
        close_all(app)
        client.flushdb()
        client.close()


# -- the README's shell lines for a newcomer ----------------------------------------------------


def _shell_lines(page: Path, command: str) -> list[str]:
    return [line.strip() for s in samples_of(page) if s.lang == "sh" for line in s.text.splitlines()
            if line.strip().startswith(command)]  # fmt: skip


def test_readme_port_command_serves_on_that_port(tmp_path: Path) -> None:
    """The README says how to choose the port; the command it shows serves there."""
    import shlex
    import subprocess
    import sys

    import requests

    from tests.servers import HOST, Service

    (line,) = _shell_lines(ROOT / "README.md", "baremetal-service --port")
    args = shlex.split(line.partition("#")[0])[1:]
    documented = args[args.index("--port") + 1]
    helped = subprocess.run([sys.executable, "-m", "baremetal_service.cli", "--help"],
                            capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    assert "--port PORT" in helped.stdout and "--host HOST" in helped.stdout
    assert "(default 6385)" in helped.stdout

    def on_port(port: int) -> list[str]:  # the README's command with a free port for its own
        argv = list(args)
        argv[argv.index("--port") + 1] = str(port)
        return [sys.executable, "-m", "baremetal_service.cli", *argv]

    with Service(tmp_path, on_port, ready_path="/v1/nodes") as service:
        resp = requests.get(f"{service.url}/v1/nodes", timeout=5)
        assert resp.status_code == 200 and resp.json() == {"nodes": []}
        assert documented.isdigit() and f"serving on http://{HOST}:{service.port}" in service.output()


def test_readme_paste_sample_served_by_the_command_replays_the_curl_create(tmp_path: Path) -> None:
    """The README's api-paste.ini served with ``baremetal-service --paste api-paste.ini`` (on a
    free port), and its curl create sent twice: one node, the second answer the first, replayed."""
    import shlex
    import sys

    import requests

    from tests.servers import Service

    write_ini(_readme_sample("[pipeline:main]"), tmp_path).rename(tmp_path / "api-paste.ini")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = re.findall(r"`baremetal-service (--paste [^`]+)`", readme)
    args = shlex.split(line)
    assert args == ["--paste", "api-paste.ini"]
    shell = [s.text for s in samples_of(ROOT / "README.md") if s.lang == "sh"]
    (curl,) = [text for text in shell if "X-Client-Token" in text]

    def argv(port: int) -> list[str]:
        return [sys.executable, "-m", "baremetal_service.cli", *args, "--port", str(port)]

    with Service(tmp_path, argv, ready_path="/v1/nodes", cwd=tmp_path) as service:
        script = curl.replace("http://127.0.0.1:6385", service.url)
        answers = [subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True, timeout=60,
                                  check=True).stdout for _ in range(2)]  # fmt: skip
        assert [re.findall(r"^HTTP/1\.1 (\d{3})", a, flags=re.M) for a in answers] == [["201"], ["201"]]
        assert re.search(r"^Idempotent-Replayed: true", answers[1], flags=re.M | re.I), answers[1]
        bodies = [json.loads(a.split("\n\n", 1)[1]) for a in answers]  # text mode: CRLF read as LF
        assert bodies[0]["uuid"] == bodies[1]["uuid"]
        latest = {"X-OpenStack-Ironic-API-Version": "latest"}
        assert len(requests.get(f"{service.url}/v1/nodes", headers=latest, timeout=10).json()["nodes"]) == 1


# -- docs/example/production.md's recipes run as written ------------------------------------------


def _sh_block(page: Path, starts: str) -> str:
    (text,) = [s.text for s in samples_of(page) if s.lang == "sh" and s.text.lstrip().startswith(starts)]
    return text


def test_production_htpasswd_recipe_makes_a_user_http_basic_accepts(tmp_path: Path) -> None:
    """The htpasswd recipe (a whole script, not an elided one-liner) runs as written,
    with /etc/baremetal in a temporary directory and the test's python as the service's python3."""
    import shlex
    import subprocess
    import sys

    from baremetal_service.auth import BasicAuthMiddleware

    script = _sh_block(DOCS / "example" / "production.md", "mkdir -p /etc/baremetal")
    python = shlex.quote(sys.executable)
    script = script.replace("/etc/baremetal", str(tmp_path / "etc")).replace("python3 -c", f"{python} -c")
    # no controlling terminal (a new session): getpass reads the password from stdin
    subprocess.run(["bash", "-e", "-c", script], input="alice-s3cret\n", capture_output=True, text=True,
                   check=True, timeout=60, start_new_session=True)  # fmt: skip
    users = tmp_path / "etc" / "htpasswd"
    assert users.stat().st_mode & 0o777 == 0o600
    assert users.read_text().startswith("alice:$2b$")  # bcrypt, the only digest http_basic takes

    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [environ["HTTP_X_USER_ID"].encode()]

    guarded = BasicAuthMiddleware(app, user_file=str(users))
    ok = run(guarded, Request.blank("/v1/nodes", headers=_basic("alice", "alice-s3cret")))
    assert ok.status_int == 200 and ok.text == "alice"
    assert run(guarded, Request.blank("/v1/nodes", headers=_basic("alice", "wrong"))).status_int == 401


def test_production_postgres_recipe_gives_the_service_its_database(
    tmp_path: Path, postgres_server: Any
) -> None:
    """The role and database creation: the psql block runs as written against
    a real PostgreSQL (``sudo -u postgres psql`` becomes psql as the superuser on the test server),
    then the service starts on the documented BAREMETAL_DATABASE, migrates and creates a node."""
    import subprocess

    import psycopg

    from baremetal_service.deploy import make_application
    from tests.servers import HOST

    page = DOCS / "example" / "production.md"
    script = _sh_block(page, "sudo -u postgres psql")
    psql = f"psql -h {HOST} -p {postgres_server.port} -U postgres"
    admin = f"host={HOST} port={postgres_server.port} user=postgres dbname=postgres"

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS baremetal WITH (FORCE)")
            conn.execute("DROP ROLE IF EXISTS baremetal")

    drop()
    try:
        done = subprocess.run(["bash", "-e", "-c", script.replace("sudo -u postgres psql", psql)],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        (documented,) = re.findall(r"^export BAREMETAL_DATABASE=(\S+)", page.read_text(), flags=re.M)
        url = documented.replace("@db.internal/", f"@{HOST}:{postgres_server.port}/")
        app = make_application({"BAREMETAL_DATABASE": url, "BAREMETAL_CONDUCTOR_WORKERS": "0"})
        try:
            create = Request.blank("/v1/nodes", method="POST", json={"driver": "fake-hardware"},
                                   headers={"X-OpenStack-Ironic-API-Version": "latest"})  # fmt: skip
            assert run(app, create).status_int == 201
        finally:
            app.close()
        with psycopg.connect(admin.replace("dbname=postgres", "dbname=baremetal"), autocommit=True) as conn:
            owner = conn.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'nodes'").fetchone()
        assert owner == ("baremetal",)  # the service's role made its tables
    finally:
        drop()


# -- option tables: a required option is marked required -----------------------------------------


@pytest.mark.parametrize("name", ["microversion", "etag", "idempotency"])
def test_option_tables_mark_the_required_options(name: str) -> None:
    """Every table row of an option says "required" in its default column exactly when the
    option is required (service_type, min_version and max_version have no default)."""
    import importlib

    from apimw._config import options_table

    options = importlib.import_module(f"apimw.{name}").OPTIONS
    page = (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8")
    table = {opt.name: opt for opt in options}
    checked = 0
    for text in (page, options_table(options, f"apimw_{name}")):
        header: list[str] = []
        for line in text.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
            if "option" in cells and "default" in cells:
                header = cells
                continue
            if not header or len(cells) != len(header) or not cells[0].startswith("`"):
                continue
            opt = table.get(cells[0].strip("`"))
            if opt is not None:
                checked += 1
                default = cells[header.index("default")]
                assert ("required" in default) == opt.required, f"{name}: {line}"
    assert checked >= 2 * len(options)


def test_the_asgi_page_runs_a_fastapi_and_a_starlette_app_with_the_three_middlewares() -> None:
    """docs/asgi.md: its samples, run above, are a FastAPI and a Starlette app."""
    samples = [s.text for s in _runnable(ROOT / "docs" / "asgi.md") if not s.fragment]
    names = ("MicroversionMiddleware", "IdempotencyMiddleware", "ETagMiddleware")
    fastapi = [s for s in samples if "FastAPI()" in s and all(f"add_middleware({n}" in s for n in names)]
    starlette = [s for s in samples if "Starlette(" in s and all(f"Middleware({n}" in s for n in names)]
    assert fastapi and starlette
    assert all("asyncio.run(try_it())" in s for s in (*fastapi, *starlette))  # each answers requests


# -- what a page points a reader at exists, in the repository ---------------------------------------

_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", [*PAGES, ROOT / "CHANGES.md", SERVICE.parents[1] / "README.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))  # fmt: skip
def test_every_relative_link_reaches_a_file_of_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in _LINK.findall(text):
        if target.startswith(("https://", "http://", "#", "mailto:")):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{page.relative_to(ROOT)}: {target}"
    assert "../shared" not in text, f"{page.relative_to(ROOT)} names a path outside the repository"


def test_no_product_file_names_a_path_outside_the_repository_or_a_tracker() -> None:
    """Sources, tests, benchmarks, docs and packaging point a reader at nothing beside the checkout:
    no sibling folder, no tracker number a reader cannot look up."""
    product = ["apimw", "examples", "tests", "bench", "docs", "scripts",
               "README.md", "README-pypi.md", "CHANGES.md", "pyproject.toml", "MANIFEST.in"]  # fmt: skip
    listed = subprocess.run(["git", "ls-files", "-z", *product], cwd=ROOT, capture_output=True,
                            check=True, timeout=60).stdout  # fmt: skip
    outside = re.compile(r"\.\./shared\b|\b(?:issue|turn) #?\d+\b|outsider", re.IGNORECASE)
    found = []
    for name in filter(None, listed.decode().split("\0")):
        path = ROOT / name
        if outside.search(name):
            found.append(name)
        if path == Path(__file__) or path.suffix in (".png", ".json") or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if outside.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_installs_are_from_the_checkout(page: Path) -> None:
    """apimw and the example service are on no package index: a page installs them from the
    checkout (``pip install .``, ``pip install ./examples/baremetal_service``)."""
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"pip install ['\"]?(apimw|baremetal-service)\b", text), page.relative_to(ROOT)


#: what a sample imports (a top-level module, or a dotted prefix) or an ini names -> the words
#: one of which an install line next to it holds
_BROUGHT_BY = {
    "flask": ("flask", "examples/baremetal_service"),
    "werkzeug": ("flask", "examples/baremetal_service"),
    "webob": ("webob",),
    "sqlalchemy": ("sqlalchemy", "examples/baremetal_service"),
    "prometheus_client": ("prometheus",),
    "opentelemetry.sdk": ("opentelemetry-sdk",),
    "opentelemetry": ("otel",),
    "fastapi": ("fastapi",),
    "starlette": ("starlette", "fastapi"),
    "httpx": ("httpx",),
    "redis": ("redis",),
    "pymemcache": ("memcached",),
    "requests": ("client", "examples/baremetal_service"),
    "bcrypt": ("examples/baremetal_service",),
    "baremetal_service": ("examples/baremetal_service",),
    "openstack": ("openstacksdk",),
    "egg:apimw#": ("paste", "examples/baremetal_service"),
    "egg:oslo.middleware#": ("oslo.middleware", "examples/baremetal_service"),
}
_IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_][\w.]*)", re.M)
_PIP = re.compile(r"pip install [^`\n]*")


def _needs(sample: Sample) -> set[str]:
    """The keys of ``_BROUGHT_BY`` the sample depends on (the longest matching prefix)."""
    names = set(_IMPORT.findall(sample.text)) if sample.lang == "python" else set()
    names |= {m.group(0) for m in re.finditer(r"egg:[\w.]+#", sample.text)}
    names |= {"baremetal_service"} if "baremetal_service." in sample.text else set()
    found: set[str] = set()
    for name in names:
        keys = [k for k in _BROUGHT_BY if name == k or name.startswith(k if k.endswith("#") else k + ".")]
        if keys:
            found.add(max(keys, key=len))
    return found


def _installs_near(page: Path, sample: Sample) -> str:
    """The install lines a reader of the sample has in front of them: the page's introduction
    (before its first ``##`` heading) and the text from the nearest heading to the sample."""
    lines = page.read_text(encoding="utf-8").splitlines()
    before = lines[: sample.line - 1]
    first_h2 = next((i for i, x in enumerate(lines) if x.startswith("## ")), len(lines))
    heading = max((i for i, x in enumerate(before) if re.match(r"#{1,6} ", x)), default=0)
    text = "\n".join(lines[: min(first_h2, sample.line - 1)] + before[heading:])
    return "\n".join(_PIP.findall(text))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_sample_states_its_installs_next_to_it(page: Path) -> None:
    """What a runnable sample imports beyond the standard library and apimw's core is installed
    by a ``pip install`` line of its section (or of the page's introduction)."""
    missing = []
    for sample in _runnable(page):
        if sample.fragment:
            continue
        installs = _installs_near(page, sample)
        for need in sorted(_needs(sample)):
            if not any(word in installs for word in _BROUGHT_BY[need]):
                missing.append(f"{sample.where}: {need} (installed by none of {installs.splitlines()})")
    assert not missing, "\n".join(missing)


# -- docs/client.md's bmctl walk-through runs as written, twice ----------------------------------


def test_bmctl_walk_through_runs_twice_against_one_service(tmp_path: Path) -> None:
    """The walk-through against the example service, as written but for the service's address
    (its own port here) and ``bmctl`` run by this interpreter; a second run on the same service
    succeeds too (a fresh client token each run: a reused one would replay the deleted node)."""
    import shlex
    import subprocess
    import sys

    import requests

    from baremetal_service.deploy import build_app
    from tests.example.handlers.conftest import Server

    page = samples_of(DOCS / "client.md")
    (script,) = [s.text for s in page if s.lang == "sh" and "bmctl node create" in s.text]
    server = Server(build_app(database_url=f"sqlite:///{tmp_path / 'svc.db'}", store_url="memory://")).start()
    try:
        script = script.replace("http://127.0.0.1:6385", server.url)
        prelude = f'bmctl() {{ {shlex.quote(sys.executable)} -m baremetal_service.bmctl "$@"; }}\n'
        for _ in range(2):
            done = subprocess.run(["bash", "-e", "-c", prelude + script], capture_output=True, text=True,
                                  timeout=300, cwd=tmp_path)  # fmt: skip
            assert done.returncode == 0, done.stderr
            latest = {"X-OpenStack-Ironic-API-Version": "latest"}
            listed = requests.get(f"{server.url}/v1/nodes", headers=latest, timeout=10)
            assert listed.json() == {"nodes": []}  # the walk-through deletes the one node it made
    finally:
        server.stop()


def test_curl_walk_through_replays_a_create_and_refuses_a_stale_etag(tmp_path: Path) -> None:
    """docs/example/baremetal-service.md's curl lines, as written but for the service's address:
    a create sent twice with one token is one node (the second answer replayed), a stale
    If-Match is 412; run twice against one service (a fresh token each run)."""
    import shutil

    import requests

    from baremetal_service.deploy import build_app
    from tests.example.handlers.conftest import Server

    assert shutil.which("curl"), "the page's walk-through uses curl"
    page = samples_of(DOCS / "example" / "baremetal-service.md")
    (script,) = [s.text for s in page if s.lang == "sh" and "X-Client-Token" in s.text]
    server = Server(build_app(database_url=f"sqlite:///{tmp_path / 'svc.db'}", store_url="memory://")).start()
    try:
        script = script.replace("http://127.0.0.1:6385", server.url)
        for run_number in range(1, 3):
            done = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True,
                                  timeout=120, cwd=tmp_path)  # fmt: skip
            assert done.returncode == 0, done.stderr
            statuses = re.findall(r"^HTTP/1\.1 (\d{3})", done.stdout, flags=re.M)
            assert statuses == ["201", "201", "412"], done.stdout
            assert len(re.findall(r"^Idempotent-Replayed: true", done.stdout, flags=re.M | re.I)) == 1
            uuids = set(re.findall(r'"uuid": ?"([0-9a-f-]{36})"', done.stdout))
            assert len(uuids) == 1, uuids  # the two printed answers are the one node
            latest = {"X-OpenStack-Ironic-API-Version": "latest"}
            listed = requests.get(f"{server.url}/v1/nodes", headers=latest, timeout=10).json()["nodes"]
            assert len(listed) == run_number  # one node per run, however often its create was sent
    finally:
        server.stop()


def test_readme_extras_table_names_every_extra() -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    rows = re.findall(r"^\| `([a-z]+)` \|", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.M)
    assert sorted(rows) == sorted(declared)
