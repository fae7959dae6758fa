"""Rotating a secret ends the old secret's tokens on every worker process of a real `floe serve`
(several workers need PostgreSQL). The token endpoint's other behaviour is in
tests/api/test_token_endpoint.py."""

from __future__ import annotations

import time

import httpx

from devtools.catalog_server import CatalogProcess
from tests.api.test_token_endpoint import bearer, new_key


def test_rotation_ends_old_tokens_on_every_worker(two_worker_server: CatalogProcess) -> None:
    """Other processes cache key state for a moment: the old secret's tokens end there within seconds
    (several workers need PostgreSQL)."""
    server = two_worker_server
    client_id, client_secret = new_key(server)
    old = server.token(client_id, client_secret)
    # Several connections, so the requests reach every worker and their caches hold the key.
    for _ in range(8):
        with httpx.Client(base_url=server.url) as fresh:
            assert fresh.get("/v1/config", headers=bearer(old)).status_code == 200
    with httpx.Client(base_url=server.url, headers=bearer(server.token())) as http:
        http.post(f"/management/v1/keys/{client_id}/rotate").raise_for_status()
    deadline = time.monotonic() + 5
    while True:
        answers = []
        for _ in range(8):
            with httpx.Client(base_url=server.url) as fresh:
                answers.append(fresh.get("/v1/config", headers=bearer(old)).status_code)
        if set(answers) == {401}:
            break
        assert time.monotonic() < deadline, f"the old secret's token kept working: {answers}"
        time.sleep(0.2)
