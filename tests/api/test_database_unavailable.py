"""A database fault answers the spec's 503 JSON with `Retry-After` and a request id on every route: the
hot routes (loadTable, listTables, token requests) exactly as Litestar's routes (issue 30, item 3).

The fault is raised in the store (what asyncpg raises for a database that does not answer in time or
refuses connections); tests/e2e/test_database_faults.py causes the real ones on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from catalog.api.app import create_app
from catalog.settings import Settings
from catalog.store.database_faults import DatabaseUnavailable

LOAD = "/v1/default/namespaces/ns/tables/t"
LIST = "/v1/default/namespaces/ns/tables"
VIA_LITESTAR = "?via=litestar"  # a parameter the hot routes do not take: Litestar answers


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    settings = Settings.from_env(
        {
            "FLOE_HOME": str(tmp_path),
            "FLOE_ADMIN_CLIENT_ID": "admin",
            "FLOE_ADMIN_CLIENT_SECRET": "a-secret-of-enough-length",
        }
    )
    app = create_app(settings)
    with TestClient(app) as client:
        client.state = app.litestar.state  # type: ignore[attr-defined]
        token = client.post(
            "/v1/oauth/tokens",
            data={
                "grant_type": "client_credentials",
                "client_id": "admin",
                "client_secret": "a-secret-of-enough-length",
            },
        ).json()["access_token"]
        client.headers["Authorization"] = f"Bearer {token}"
        client.post("/v1/default/namespaces", json={"namespace": ["ns"]}).raise_for_status()
        schema = {"type": "struct", "schema-id": 0, "fields": []}
        client.post("/v1/default/namespaces/ns/tables", json={"name": "t", "schema": schema})
        yield client


def _fail_every_statement(monkeypatch: pytest.MonkeyPatch, client: TestClient[Any], exc: Exception) -> None:
    """Every statement of the store raises `exc` (as the database driver would)."""

    async def fail(*_: Any, **__: Any) -> Any:
        raise exc

    state = client.state  # type: ignore[attr-defined]
    store = state.components.store
    monkeypatch.setattr(store, "_fetch", fail)
    for name in ("_reading", "_writing"):
        monkeypatch.setattr(store, name, lambda: _FailingConnection(exc))
    # Keys, tables and listings answered from per-process caches would never reach the store.
    monkeypatch.setattr(state.auth, "authenticate", fail)


class _FailingConnection:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def __aenter__(self) -> None:
        raise self.exc

    async def __aexit__(self, *_: object) -> None:
        return None


def _assert_unavailable(response: Any) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "error": {
            "message": "The catalog database is unavailable; retry later",
            "type": "ServiceUnavailableException",
            "code": 503,
        }
    }
    assert int(response.headers["retry-after"]) > 0
    assert response.headers["x-request-id"]


@pytest.mark.parametrize("exc", [TimeoutError(), ConnectionRefusedError(), DatabaseUnavailable()])
def test_hot_and_litestar_routes_answer_503_json(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch, exc: Exception
) -> None:
    _fail_every_statement(monkeypatch, client, exc)
    for path in (LOAD, LIST, "/v1/default/namespaces/ns/views"):
        _assert_unavailable(client.get(path))
        _assert_unavailable(client.get(path + VIA_LITESTAR))
    _assert_unavailable(client.get("/v1/default/namespaces/ns"))


def test_a_token_request_answers_503_json(client: TestClient[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    _fail_every_statement(monkeypatch, client, TimeoutError())
    form = {"grant_type": "client_credentials", "client_id": "someone", "client_secret": "x" * 20}
    _assert_unavailable(client.post("/v1/oauth/tokens", data=form))
