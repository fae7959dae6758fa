"""Two `floe serve` processes on one PostgreSQL database (issues 29.10 and 30.8): a token signed with a
signing key another process just created is accepted on its first use, and a console sign-out in one
process ends the session's token in the other within the key-state cache's seconds."""

from __future__ import annotations

import base64
import json
import secrets
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from catalog.console.session import SESSION_COOKIE
from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres
from tests.api.test_console import Browser
from tests.api.test_token_endpoint import bearer, new_key


@pytest.fixture(scope="module")
def two_processes(postgres: LocalPostgres) -> Iterator[tuple[CatalogProcess, CatalogProcess]]:
    """Two processes on one database, for the module: each test works with keys and sessions of its own
    (the first rotates the signing keys, which the second's tokens do not depend on)."""
    database_url = postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")
    env = {"FLOE_ADMIN_CLIENT_ID": "floe-admin", "FLOE_ADMIN_CLIENT_SECRET": secrets.token_urlsafe(24)}
    with ExitStack() as stack:
        first = stack.enter_context(CatalogProcess(database_url, env=env))
        second = stack.enter_context(CatalogProcess(database_url, env=env))
        yield first, second


def kid_of(token: str) -> str:
    head = token.split(".")[0]
    return str(json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))["kid"])


def test_a_new_signing_key_is_accepted_by_the_other_process_at_once(
    two_processes: tuple[CatalogProcess, CatalogProcess],
) -> None:
    first, second = two_processes
    before = first.token()
    with httpx.Client(base_url=second.url, timeout=30) as other:
        assert other.get("/v1/config", headers=bearer(before)).status_code == 200
        # The other process has just read the signing keys (a token of a key id it does not know makes
        # it read them), so it would not read them again for a while.
        header = json.dumps({"alg": "ES256", "kid": "floe-unknown", "typ": "JWT"}).encode()
        junk = f"{base64.urlsafe_b64encode(header).rstrip(b'=').decode()}.{before.split('.', 1)[1]}"
        assert other.get("/v1/config", headers=bearer(junk)).status_code == 401
        with httpx.Client(base_url=first.url, timeout=30, headers=bearer(before)) as admin:
            rotated = admin.post("/management/v1/signing-keys/rotate")
            assert rotated.status_code == 200, rotated.text
        after = first.token()
        assert kid_of(after) == rotated.json()["kid"] != kid_of(before)
        # First use in the other process: accepted (it reads the keys again within a second).
        started = time.monotonic()
        accepted = other.get("/v1/config", headers=bearer(after))
        waited = time.monotonic() - started
        assert accepted.status_code == 200, (accepted.text, waited)
        assert other.get("/v1/config", headers=bearer(before)).status_code == 200  # the old key verifies


def test_sign_out_in_one_process_ends_the_token_in_the_other(
    two_processes: tuple[CatalogProcess, CatalogProcess],
) -> None:
    first, second = two_processes
    client_id, client_secret = new_key(first, role="reader")
    browser = Browser(first.url)
    try:
        signed_in = browser.post("/console/sign-in", {"client_id": client_id, "client_secret": client_secret})
        assert signed_in.status_code == 303, signed_in.text
        token = browser.http.cookies[SESSION_COOKIE]
        with httpx.Client(base_url=second.url, timeout=30) as other:
            # The other process knows the token and caches its key's state.
            assert other.get("/v1/config", headers=bearer(token)).status_code == 200
            assert browser.post("/console/sign-out").status_code == 303
            assert httpx.get(f"{first.url}/v1/config", headers=bearer(token)).status_code == 401
            deadline = time.monotonic() + 5  # the key-state cache holds for 2 s
            while (answer := other.get("/v1/config", headers=bearer(token))).status_code != 401:
                assert answer.status_code == 200, answer.text
                assert time.monotonic() < deadline, "the signed-out token kept working in the other process"
                time.sleep(0.1)
            listing = other.get("/v1/default/namespaces/a/tables", headers=bearer(token))
            assert listing.status_code == 401, listing.text
            # The key's other tokens keep working there.
            assert other.get("/v1/config", headers=bearer(second.token(client_id, client_secret))).is_success
        with httpx.Client(base_url=second.url, timeout=30, follow_redirects=False) as console:
            console.cookies.set(SESSION_COOKIE, token, path="/console")
            page = console.get("/console")
            assert page.status_code == 303, (page.status_code, page.text[:300])
            assert page.headers["location"] == "/console/sign-in"
    finally:
        browser.close()
