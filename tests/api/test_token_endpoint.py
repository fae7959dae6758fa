"""The token endpoint under load and attack, on both backends: token requests do not stall other
requests, junk from one address does not lock out valid credentials from it, concurrent wrong secrets
stay within the per-client limit, secrets stored by older floe versions (scrypt) still verify and are
upgraded, and rotating a secret ends the tokens issued for the old one (on every worker process: in
tests/e2e/test_token_endpoint.py)."""

from __future__ import annotations

import asyncio
import json
import secrets
import statistics
import time
import uuid
from collections import Counter
from typing import Any
from urllib.parse import urlencode

import httpx
from joserfc import jwt
from joserfc.jwk import ECKey
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from catalog.store.schema import api_keys, signing_keys
from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread
from tests.unit.test_secrets import legacy_scrypt_hash

TOKEN_PATH = "/v1/oauth/tokens"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def credentials(client_id: str, client_secret: str) -> dict[str, str]:
    return {"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_key(server: CatalogProcess, role: str = "writer") -> tuple[str, str]:
    """A fresh cluster and a key of it: (client_id, client_secret)."""
    with httpx.Client(base_url=server.url, timeout=30, headers=bearer(server.token())) as http:
        cluster = f"kafka_{uuid.uuid4().hex[:8]}"
        http.post("/management/v1/clusters", json={"name": cluster}).raise_for_status()
        created = http.post("/management/v1/keys", json={"cluster": cluster, "role": role})
        key = created.raise_for_status().json()
    return key["client_id"], key["client_secret"]


def run_db(database_url: str, statement: Any) -> Any:
    """Run one statement against the server's database (to plant what an older floe stored)."""

    async def go() -> Any:
        engine = create_async_engine(database_url, poolclass=NullPool)
        try:
            async with engine.begin() as conn:
                result = await conn.execute(statement)
                return result.all() if result.returns_rows else None
        finally:
            await engine.dispose()

    return asyncio.run(go())


# -- token requests and everyone else --------------------------------------------------------------


def test_token_requests_do_not_stall_other_requests(catalog_server: CatalogProcess, admin_token: str) -> None:
    """scrypt on the event loop made every request wait behind token requests (p50 9 ms -> 534 ms)."""
    client_id, client_secret = new_key(catalog_server)
    form = credentials(client_id, client_secret)

    async def scenario() -> tuple[list[float], list[float], Counter[int]]:
        async with httpx.AsyncClient(base_url=catalog_server.url, timeout=60) as client:

            async def timed_reads(count: int) -> list[float]:
                latencies = []
                for _ in range(count):
                    started = time.perf_counter()
                    response = await client.get("/management/v1/clusters", headers=bearer(admin_token))
                    assert response.status_code == 200, response.text
                    latencies.append(time.perf_counter() - started)
                return latencies

            await timed_reads(5)  # warm connections and caches
            alone = [ms for part in await asyncio.gather(*(timed_reads(15) for _ in range(2))) for ms in part]
            statuses: Counter[int] = Counter()
            remaining = 60

            async def token_client() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    statuses[(await client.post(TOKEN_PATH, data=form)).status_code] += 1

            tokens = asyncio.gather(*(token_client() for _ in range(12)))
            await asyncio.sleep(0.05)  # let the token requests get going
            during = [
                ms for part in await asyncio.gather(*(timed_reads(10) for _ in range(2))) for ms in part
            ]
            await tokens
            return alone, during, statuses

    alone, during, statuses = asyncio.run(scenario())
    assert statuses == Counter({200: 60})
    baseline, loaded = statistics.median(alone), statistics.median(during)
    # Token requests share the CPU (2 cores for the server, PostgreSQL and this client), so some slowdown
    # is expected; scrypt on the event loop added hundreds of milliseconds to every request.
    assert loaded <= 4 * baseline + 0.1, f"median {loaded * 1000:.1f} ms vs {baseline * 1000:.1f} ms alone"


# -- failure limits ---------------------------------------------------------------------------------


def test_junk_from_an_address_does_not_lock_out_valid_credentials(fresh_database_url: str) -> None:
    env = {"FLOE_AUTH_SOURCE_FAILURE_LIMIT": "5", "FLOE_AUTH_FAILURE_LIMIT": "100"}
    with CatalogThread(fresh_database_url, env=env) as server:
        client_id, client_secret = new_key(server)
        url = f"{server.url}{TOKEN_PATH}"
        junk = [httpx.post(url, data=credentials(f"nobody_{i}", "x")) for i in range(8)]
        assert [r.status_code for r in junk] == [401] * 5 + [429] * 3
        assert all(r.json()["error"] == "invalid_client" for r in junk)
        assert int(junk[-1].headers["retry-after"]) > 0

        # Everyone else behind that address (a shared proxy) still gets tokens, through both channels.
        assert httpx.post(url, data=credentials(client_id, client_secret)).status_code == 200
        basic = httpx.post(url, data={"grant_type": "client_credentials"}, auth=(client_id, client_secret))
        assert basic.status_code == 200, basic.text
        assert httpx.post(
            url, data=credentials(server.admin_client_id, server.admin_client_secret)
        ).is_success

        # Failures stay limited, a wrong secret of a real key included.
        assert httpx.post(url, data=credentials(client_id, "wrong")).status_code == 429
        assert httpx.post(url, data=credentials("nobody", "x")).status_code == 429

        # So are client ids no key can have.
        too_long = httpx.post(url, data=credentials("x" * 5000, "x"))
        assert too_long.status_code == 429, too_long.text


def test_odd_client_ids_are_client_errors(catalog_server: CatalogProcess) -> None:
    for odd in ("a\x00b", "x" * 5000, "é" * 40):
        response = httpx.post(f"{catalog_server.url}{TOKEN_PATH}", data=credentials(odd, "x"))
        # PostgreSQL text cannot hold NUL and the client_id column is 64 characters: never a 500.
        assert response.status_code in (400, 401), response.text
        assert response.json()["error"] in ("invalid_request", "invalid_client")


def test_concurrent_wrong_secrets_stay_within_the_client_limit(fresh_database_url: str) -> None:
    limit = 5
    env = {"FLOE_AUTH_FAILURE_LIMIT": str(limit), "FLOE_AUTH_SOURCE_FAILURE_LIMIT": "1000"}
    with CatalogThread(fresh_database_url, env=env) as server:
        client_id, client_secret = new_key(server)

        async def attack() -> Counter[int]:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                answers = await asyncio.gather(
                    *(client.post(TOKEN_PATH, data=credentials(client_id, f"guess-{i}")) for i in range(40))
                )
            for answer in answers:
                assert answer.json()["error"] == "invalid_client"
            return Counter(a.status_code for a in answers)

        statuses = asyncio.run(attack())
        # Every 401 is a checked guess: no more than the limit may have been checked.
        assert statuses[401] <= limit, statuses
        assert statuses[401] + statuses[429] == 40, statuses
        # Over the limit even the right secret is not checked until the window ends.
        refused = httpx.post(f"{server.url}{TOKEN_PATH}", data=credentials(client_id, client_secret))
        assert refused.status_code == 429
        # Other clients are not affected.
        assert server.token()


# -- secrets of older floe versions -----------------------------------------------------------------


def test_scrypt_hash_of_an_older_floe_verifies_and_is_upgraded(
    catalog_server: CatalogProcess, database_url: str
) -> None:
    client_id, _ = new_key(catalog_server)
    secret = secrets.token_urlsafe(32)
    run_db(
        database_url,
        update(api_keys)
        .where(api_keys.c.client_id == client_id)
        .values(secret_hash=legacy_scrypt_hash(secret)),
    )
    url = f"{catalog_server.url}{TOKEN_PATH}"

    # A token an older floe issued for that secret: signed with the server's key, no secret version.
    ((kid, private_jwk),) = run_db(
        database_url,
        select(signing_keys.c.kid, signing_keys.c.private_jwk)
        .where(signing_keys.c.retired_at.is_(None))
        .order_by(signing_keys.c.created_at.desc())
        .limit(1),
    )
    now = int(time.time())
    old_claims = {"sub": client_id, "iss": "floe", "iat": now, "nbf": now - 5, "exp": now + 600}
    old_token = jwt.encode(
        {"alg": "ES256", "kid": kid, "typ": "JWT"},
        {**old_claims, "jti": uuid.uuid4().hex},
        ECKey.import_key(json.loads(private_jwk)),
        algorithms=["ES256"],
    )

    assert httpx.post(url, data=credentials(client_id, "wrong")).status_code == 401
    first = httpx.post(url, data=credentials(client_id, secret))
    assert first.status_code == 200, first.text
    ((stored,),) = run_db(
        database_url, select(api_keys.c.secret_hash).where(api_keys.c.client_id == client_id)
    )
    assert stored.startswith("hmac-sha256$"), stored
    assert secret not in stored

    # The upgraded hash keeps working, and still tells the right secret from a wrong one.
    again = httpx.post(url, data=credentials(client_id, secret))
    assert again.status_code == 200, again.text
    assert httpx.post(url, data=credentials(client_id, "wrong")).status_code == 401
    for token in (first.json()["access_token"], again.json()["access_token"], old_token):
        assert httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(token)).status_code == 200

    # Rotation ends all of them, the older floe's token included.
    with httpx.Client(base_url=catalog_server.url, headers=bearer(catalog_server.token())) as http:
        http.post(f"/management/v1/keys/{client_id}/rotate").raise_for_status()
    for token in (first.json()["access_token"], old_token):
        assert httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(token)).status_code == 401


# -- rotation ---------------------------------------------------------------------------------------


def test_rotation_ends_tokens_of_the_old_secret(catalog_server: CatalogProcess, admin_token: str) -> None:
    client_id, client_secret = new_key(catalog_server)
    old = catalog_server.token(client_id, client_secret)
    exchanged = httpx.post(
        f"{catalog_server.url}{TOKEN_PATH}", data={"grant_type": EXCHANGE, "subject_token": old}
    )
    assert exchanged.status_code == 200, exchanged.text
    old_tokens = [old, exchanged.json()["access_token"]]
    for token in old_tokens:
        assert httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(token)).status_code == 200

    with httpx.Client(base_url=catalog_server.url, headers=bearer(admin_token)) as http:
        rotated = http.post(f"/management/v1/keys/{client_id}/rotate")
    assert rotated.status_code == 200, rotated.text
    new_secret = rotated.json()["client_secret"]

    for token in old_tokens:
        refused = httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(token))
        assert refused.status_code == 401, refused.text  # one worker: at once, no cache delay
    refused_exchange = httpx.post(
        f"{catalog_server.url}{TOKEN_PATH}", data={"grant_type": EXCHANGE, "subject_token": old}
    )
    assert refused_exchange.status_code == 401
    assert refused_exchange.json()["error"] == "invalid_client"

    new = catalog_server.token(client_id, new_secret)
    assert httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(new)).status_code == 200


# -- tokens answered again, and the form body ---------------------------------------------------------


def test_a_token_of_a_moment_ago_is_answered_again(catalog_server: CatalogProcess) -> None:
    """Engines ask for a token before most queries: the same key's token of a moment ago comes back,
    with the lifetime it has left; a refresh (token exchange) and a new secret get a new one."""
    client_id, client_secret = new_key(catalog_server)
    url = f"{catalog_server.url}{TOKEN_PATH}"
    first = httpx.post(url, data=credentials(client_id, client_secret)).raise_for_status().json()
    again = httpx.post(url, data=credentials(client_id, client_secret)).raise_for_status().json()
    assert again["access_token"] == first["access_token"]
    assert 3600 - 60 <= again["expires_in"] <= first["expires_in"] <= 3600
    basic = httpx.post(url, data={"grant_type": "client_credentials"}, auth=(client_id, client_secret))
    assert basic.raise_for_status().json()["access_token"] == first["access_token"]

    refreshed = httpx.post(url, data={"grant_type": EXCHANGE, "subject_token": first["access_token"]})
    assert refreshed.raise_for_status().json()["access_token"] != first["access_token"]

    with httpx.Client(base_url=catalog_server.url, headers=bearer(catalog_server.token())) as http:
        new_secret = http.post(f"/management/v1/keys/{client_id}/rotate").raise_for_status().json()
    after = httpx.post(url, data=credentials(client_id, new_secret["client_secret"])).raise_for_status()
    assert after.json()["access_token"] != first["access_token"]
    assert (
        httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(first["access_token"])).status_code == 401
    )
    assert httpx.get(
        f"{catalog_server.url}/v1/config", headers=bearer(after.json()["access_token"])
    ).is_success


def test_a_repeated_request_stands_only_while_its_key_does(catalog_server: CatalogProcess) -> None:
    """A request identical to one granted a moment ago is answered without checking it again, but never
    past a revocation, a rotation or a wrong secret (one worker: at once)."""
    url = f"{catalog_server.url}{TOKEN_PATH}"
    admin = bearer(catalog_server.token())
    client_id, client_secret = new_key(catalog_server)
    form = credentials(client_id, client_secret)
    granted = [httpx.post(url, data=form).raise_for_status().json()["access_token"] for _ in range(3)]
    assert len(set(granted)) == 1
    wrong = httpx.post(url, data={**form, "client_secret": client_secret[:-1] + "x"})
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "invalid_client"
    rotated = httpx.post(f"{catalog_server.url}/management/v1/keys/{client_id}/rotate", headers=admin)
    assert httpx.post(url, data=form).status_code == 401  # the old secret, repeated
    new_form = credentials(client_id, rotated.raise_for_status().json()["client_secret"])
    assert httpx.post(url, data=new_form).status_code == 200
    assert httpx.post(url, data=new_form).status_code == 200
    httpx.delete(f"{catalog_server.url}/management/v1/keys/{client_id}", headers=admin).raise_for_status()
    refused = httpx.post(url, data=new_form)
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"] == "invalid_client"


def test_token_reuse_can_be_turned_off(fresh_database_url: str) -> None:
    with CatalogThread(fresh_database_url, env={"FLOE_TOKEN_REUSE_SECONDS": "0"}) as server:
        form = credentials(server.admin_client_id, server.admin_client_secret)
        tokens = [
            httpx.post(f"{server.url}{TOKEN_PATH}", data=form).raise_for_status().json() for _ in range(2)
        ]
        assert tokens[0]["access_token"] != tokens[1]["access_token"]
        assert [t["expires_in"] for t in tokens] == [3600, 3600]


def test_malformed_token_forms_are_oauth_errors(catalog_server: CatalogProcess) -> None:
    url = f"{catalog_server.url}{TOKEN_PATH}"
    form = "grant_type=client_credentials&client_id=a&client_id=b&client_secret=x"
    twice = httpx.post(url, content=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert twice.status_code == 400, twice.text
    assert twice.json()["error"] == "invalid_request"
    assert "client_id" in twice.json()["error_description"]

    huge = httpx.post(url, data={"grant_type": "client_credentials", "client_secret": "x" * 100_000})
    assert huge.status_code == 413, huge.text
    assert huge.json()["error"] == "invalid_request"

    # Parameters a token request does not have are ignored (RFC 6749 §3.2); a charset is fine.
    known = credentials(catalog_server.admin_client_id, catalog_server.admin_client_secret)
    odd = httpx.post(
        url,
        content=urlencode({**known, "audience": "x"}),
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=UTF-8"},
    )
    assert odd.status_code == 200, odd.text
    assert odd.headers["cache-control"] == "no-store"
    assert odd.headers["x-request-id"]
