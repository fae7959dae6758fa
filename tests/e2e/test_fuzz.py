"""Property-based fuzzing of every operation in `openapi/floe.json` against a real `floe serve`: no request,
valid or not, may get a 5xx (the spec and README promise 4xx for client errors).

schemathesis generates requests from the document (schema-conforming and schema-violating ones), a
bounded number per operation and generation mode; half of them target a warehouse, namespace, table and
view that exist, so commits, loads and drops reach the database and the commit core. Requests are sent
as the bootstrap admin, the token endpoint included. Each backend gets its own server: the fuzzer
applies pipelines, rotates signing keys and drops what it finds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode

from catalog.api.openapi import OPENAPI_PATH
from devtools.catalog_server import CatalogProcess

# Examples per operation, generation mode and target: ~45 operations x 4 x this, about a minute a backend.
EXAMPLES = 12
FIXED = {"prefix": "default", "namespace": "fuzz", "table": "t", "view": "v"}
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "a", "type": "long", "required": False}],
}
VIEW_VERSION = {
    "version-id": 1,
    "timestamp-ms": 1,
    "schema-id": 0,
    "summary": {},
    "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}],
    "default-namespace": ["fuzz"],
}


@pytest.fixture
def fuzz_server(fresh_database_url: str, tmp_path: Path) -> Iterator[CatalogProcess]:
    with CatalogProcess(fresh_database_url, home=tmp_path / "home") as server:
        yield server


def ensure_targets(client: httpx.Client) -> None:
    """The namespace, table and view the fixed-target requests address (the fuzzer may drop them)."""
    client.post("/v1/default/namespaces", json={"namespace": ["fuzz"]})
    client.post("/v1/default/namespaces/fuzz/tables", json={"name": "t", "schema": SCHEMA})
    view = {"name": "v", "schema": SCHEMA, "view-version": VIEW_VERSION, "properties": {}}
    client.post("/v1/default/namespaces/fuzz/views", json=view)


def test_no_request_gets_a_server_error(fuzz_server: CatalogProcess) -> None:
    headers = {"Authorization": f"Bearer {fuzz_server.token()}"}
    schema = schemathesis.openapi.from_path(str(OPENAPI_PATH))
    failures: list[str] = []
    sent = 0
    with httpx.Client(base_url=fuzz_server.url, headers=headers, timeout=30) as client:
        for result in schema.get_all_operations():
            operation = result.ok()  # type: ignore[union-attr]  # an invalid document fails here
            ensure_targets(client)
            fixed = {name: value for name, value in FIXED.items() if f"{{{name}}}" in operation.path}
            strategies = []
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                strategies.append(operation.as_strategy(mode))
                if fixed:
                    strategies.append(operation.as_strategy(mode, path_parameters=fixed))

            @settings(
                max_examples=EXAMPLES * len(strategies),
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=st.one_of(strategies))
            def send(case: Any) -> None:
                nonlocal sent
                if (case.path_parameters or {}).get("client_id") == fuzz_server.admin_client_id:
                    return  # revoking or rotating the admin key would only turn the rest into 401s
                sent += 1
                try:
                    response = case.call(base_url=fuzz_server.url, headers=headers, timeout=30)
                except Exception as exc:  # the server hung up or crashed
                    failures.append(f"{exc!r}\n  {case.as_curl_command()}")
                    return
                if response.status_code >= 500:
                    failures.append(
                        f"{response.status_code} {response.text[:300]}\n  {case.as_curl_command()}"
                    )

            send()
    assert sent > 1000
    assert not failures, f"{len(failures)} server errors:\n" + "\n".join(failures[:20])
    assert "Traceback" not in fuzz_server.log_text()
