"""A missing optional library is one line naming the extra that installs it.

Each case runs in a fresh interpreter where the library is hidden (``sys.modules[name] =
None`` makes ``import name`` fail as if it were not installed) and lets the error escape,
as a service's start-up would: the last line of the traceback is the whole explanation.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from apimw.errors import ConfigError, MissingExtraError

PASTE = """
[pipeline:main]
pipeline = idempotency app

[filter:idempotency]
use = egg:apimw#idempotency
store = redis://127.0.0.1:6379/0

[app:app]
paste.app_factory = tests.test_paste_config:app_factory
"""


@pytest.mark.parametrize(
    ("hidden", "code", "message"),
    [
        pytest.param("redis", "from apimw.idempotency import IdempotencyMiddleware\n"
                     "IdempotencyMiddleware(lambda e, s: [], store='redis://127.0.0.1:6379/0')",
                     "redis:// needs the redis library: pip install 'apimw[redis]'", id="redis"),
        pytest.param("redis", "from apimw.idempotency import open_store\n"
                     "open_store('redis+sentinel://127.0.0.1:26379/mymaster')",
                     "redis+sentinel:// needs the redis library: pip install 'apimw[redis]'", id="sentinel"),
        pytest.param("redis", "from apimw.asgi import open_async_store\n"
                     "open_async_store('redis://127.0.0.1:6379/0')",
                     "redis:// needs the redis library: pip install 'apimw[redis]'", id="asgi-redis"),
        pytest.param("pymemcache", "from apimw.idempotency import IdempotencyMiddleware\n"
                     "IdempotencyMiddleware(lambda e, s: [], store='memcached://127.0.0.1:11211')",
                     "memcached:// needs the pymemcache library: pip install 'apimw[memcached]'",
                     id="memcached"),
        pytest.param("oslo_config", "from apimw import microversion\nmicroversion.list_opts()",
                     "oslo.config support needs the oslo.config library: pip install 'apimw[oslo]'",
                     id="list-opts"),
        pytest.param("oslo_config", "from apimw import etag\netag.oslo_hook(lambda e, s: [])",
                     "oslo.config support needs the oslo.config library: pip install 'apimw[oslo]'",
                     id="oslo-hook"),
        pytest.param("oslo_config", "from apimw import idempotency\n"
                     "idempotency.filter_factory({}, oslo_config_project='svc')",
                     "oslo.config support needs the oslo.config library: pip install 'apimw[oslo]'",
                     id="paste-oslo-project"),
        pytest.param("webob", "import apimw.webob",
                     "apimw.webob needs the WebOb library: pip install 'apimw[webob]'", id="webob"),
        pytest.param("sqlalchemy", "import apimw.etag_db",
                     "apimw.etag_db needs the SQLAlchemy library: pip install 'apimw[sqlalchemy]'",
                     id="etag-db"),
        pytest.param("sqlalchemy", "import apimw.idempotency_db",
                     "needs the SQLAlchemy library: pip install 'apimw[sqlalchemy]'", id="idempotency-db"),
        pytest.param("requests", "import apimw.client",
                     "apimw.client needs the requests library: pip install 'apimw[client]'", id="client"),
        pytest.param("requests", "import apimw.client_resources",
                     "apimw.client needs the requests library: pip install 'apimw[client]'",
                     id="client-resources"),
        pytest.param("jsonpatch", "import apimw.client_resources",
                     "apimw.client_resources needs the jsonpatch library: pip install 'apimw[client]'",
                     id="client-resources-jsonpatch"),
        pytest.param("prometheus_client", "import apimw.metrics_prometheus",
                     "apimw.metrics_prometheus needs the prometheus_client library: pip install "
                     "'apimw[prometheus]'", id="prometheus"),
        pytest.param("prometheus_client", "from apimw.microversion import MicroversionMiddleware\n"
                     "MicroversionMiddleware(lambda e, s: [], service_type='x', min_version='1.1', "
                     "max_version='1.2', metrics='apimw.metrics_prometheus:METRICS')",
                     "pip install 'apimw[prometheus]'", id="prometheus-option"),
        pytest.param("opentelemetry", "import apimw.metrics_otel",
                     "apimw.metrics_otel needs the opentelemetry-api library: pip install 'apimw[otel]'",
                     id="otel"),
        pytest.param("redis", f"from paste.deploy import loadapp\nimport pathlib\n"
                     f"pathlib.Path('api-paste.ini').write_text({PASTE!r})\n"
                     "loadapp('config:' + str(pathlib.Path('api-paste.ini').resolve()))",
                     "needs the redis library: pip install 'apimw[redis]'", id="paste"),
    ],
)  # fmt: skip
def test_a_missing_library_is_one_line_naming_the_extra(
    tmp_path: Path, hidden: str, code: str, message: str
) -> None:
    root = str(Path(__file__).resolve().parents[1])  # behind site-packages: for tests.test_paste_config
    prelude = f"import sys\nsys.path.append({root!r})\nsys.modules[{hidden!r}] = None\n"
    out = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("apimw.errors.")
    assert last.endswith(message), out.stderr


def test_the_error_is_a_config_error_and_an_import_error() -> None:
    """``except ConfigError`` (start-up checks) and ``except ImportError`` (optional imports) catch it."""
    assert issubclass(MissingExtraError, ConfigError)
    assert issubclass(MissingExtraError, ImportError)


#: Every optional library of pyproject.toml's extras, by the name it is imported as.
OPTIONAL = ("redis", "pymemcache", "flask", "webob", "paste", "oslo_config", "requests", "jsonpatch",
            "sqlalchemy", "prometheus_client", "opentelemetry", "orjson")  # fmt: skip
#: The modules that need no extra.
CORE = ("apimw", "apimw.errors", "apimw.config", "apimw.discovery", "apimw.metrics", "apimw.microversion",
        "apimw.etag", "apimw.idempotency", "apimw.asgi", "apimw._opts")  # fmt: skip


def test_the_core_imports_with_no_optional_library_installed(tmp_path: Path) -> None:
    """``pip install apimw`` alone: the middlewares import; their names resolve; a memory:// store opens."""
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in OPTIONAL)
    code = prelude + textwrap.dedent(f"""
        import importlib
        for name in {CORE!r}:
            module = importlib.import_module(name)
            for attr in getattr(module, "__all__", ()):
                getattr(module, attr)
        from apimw.idempotency import open_store
        open_store("memory://").close()
        print("imported")
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "imported"
