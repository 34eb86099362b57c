"""Defects found by trying apimw from outside, as a client would."""

from __future__ import annotations

import pytest
from flask import Flask
from werkzeug.test import Client

from apimw import ETagMiddleware, IdempotencyMiddleware


@pytest.mark.parametrize("method", ["patch", "Patch", "put", "delete"])
def test_an_if_match_write_in_another_case_is_refused_too(method: str) -> None:
    """Flask (werkzeug) and pecan route a method whatever its case, and uwsgi, mod_wsgi and
    eventlet pass ``patch`` through as sent: the refusal of an If-Match the app cannot
    enforce must not depend on the case, or the write is applied unconditionally."""
    app = Flask(__name__)
    writes: list[str] = []

    @app.route("/v1/nodes/<name>", methods=["PATCH", "PUT", "DELETE"])
    def write(name: str) -> dict[str, bool]:
        writes.append(name)
        return {"written": True}

    app.wsgi_app = ETagMiddleware(app.wsgi_app)  # type: ignore[method-assign]  # enforces: empty
    resp = Client(app).open("/v1/nodes/n1", method=method, headers={"If-Match": 'W/"stale"'}, json=[])
    assert resp.status_code == 400, resp.get_data()
    assert resp.json is not None and resp.json["errors"][0]["code"] == "etag.if-match-unsupported"
    assert writes == []


def test_a_client_token_on_a_post_in_another_case_is_kept() -> None:
    """``curl -X post`` with a token, retried: one write, the retry replayed."""
    app = Flask(__name__)
    writes: list[int] = []

    @app.post("/v1/nodes")
    def create() -> tuple[dict[str, int], int]:
        writes.append(1)
        return {"n": len(writes)}, 201

    app.wsgi_app = IdempotencyMiddleware(app.wsgi_app, store="memory://", scope="shared")  # type: ignore[method-assign]
    client = Client(app)
    first = client.open("/v1/nodes", method="post", headers={"X-Client-Token": "t1"}, json={})
    again = client.open("/v1/nodes", method="post", headers={"X-Client-Token": "t1"}, json={})
    assert first.status_code == again.status_code == 201
    assert again.headers.get("Idempotent-Replayed") == "true" and writes == [1]
