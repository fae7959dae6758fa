"""`Idempotency-Key` across a crash: a real `floe serve` killed with SIGKILL while a request with a key
is in flight leaves the key pending; after a restart the retry is served within the lease, not a 503.
The rest of the behaviour is in tests/api/test_idempotency.py."""

from __future__ import annotations

import json
import time
import uuid

import httpx

from catalog.api.middleware import IDEMPOTENCY_LEASE_SECONDS
from devtools.catalog_server import CatalogProcess
from tests.api.test_idempotency import SlowPost, admin_identity, bearer, new_key, stored_rows, wait_for
from tests.api.test_rest_api import PREFIX


def test_retry_after_kill_9_is_served_within_seconds(fresh_database_url: str) -> None:
    """kill -9 while a request with a key is in flight, restart: the retry is served, not a 503."""
    server = CatalogProcess(fresh_database_url)
    name = f"idem_{uuid.uuid4().hex[:8]}"
    key = new_key()
    body = json.dumps({"namespace": [name]}).encode()
    path = f"{PREFIX}/namespaces"
    stored, _ = admin_identity(server, key["Idempotency-Key"], path)
    with server:
        slow = SlowPost(server.url, path, body, {**bearer(server.token()), **key})
        wait_for(lambda: [r.state for r in stored_rows(fresh_database_url) if r.key == stored] == ["pending"])
        assert server.process is not None
        server.process.kill()  # SIGKILL: no shutdown, no cleanup of the pending key
        server.process.wait()
        slow.close()
    [row] = [r for r in stored_rows(fresh_database_url) if r.key == stored]
    assert row.state == "pending"
    assert row.owner
    env = {
        "FLOE_ADMIN_CLIENT_ID": server.admin_client_id,
        "FLOE_ADMIN_CLIENT_SECRET": server.admin_client_secret,
    }
    with CatalogProcess(fresh_database_url, home=server.home, env=env) as restarted:
        headers = {**bearer(restarted.token()), **key}
        started = time.monotonic()
        retry = httpx.post(f"{restarted.url}{path}", content=body, headers=headers, timeout=60)
        elapsed = time.monotonic() - started
        assert retry.status_code == 200, retry.text
        assert elapsed < IDEMPOTENCY_LEASE_SECONDS + 3, f"served after {elapsed:.1f} s"
        again = httpx.post(f"{restarted.url}{path}", content=body, headers=headers, timeout=60)
        assert again.status_code == 200
        assert again.content == retry.content
        loaded = httpx.get(f"{restarted.url}{path}/{name}", headers=headers)
        assert loaded.status_code == 200, loaded.text
