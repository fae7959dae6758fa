"""Attacks on authentication (issue 29), on both backends: a tenant guessing the admin's secret does not
lock the admin out; guessing stays bounded per address and across many addresses; random client ids
leave a bounded, expiring failure table; malformed tokens of every kind are 401 on every route that
takes one (never a 500); console sign-out ends the session's token as a bearer token too.

The in-process server does not trust X-Forwarded-For: requests come from other loopback addresses
(127.0.0.2, ...) through a client bound to them, so the server sees each as its own source.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from joserfc import jws
from joserfc.jwk import ECKey
from sqlalchemy import func, select

import catalog.service.auth_failures as auth_failures_module
import catalog.service.security as security_module
from catalog.console.session import SESSION_COOKIE
from catalog.store.schema import auth_failures, revoked_tokens, signing_keys
from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread
from tests.api.oidc_provider import MockOAuth2Server
from tests.api.test_console import Browser
from tests.api.test_token_endpoint import EXCHANGE, TOKEN_PATH, bearer, credentials, new_key, run_db


@contextmanager
def client_from(address: str, server: CatalogProcess) -> Iterator[httpx.Client]:
    """A client whose connections come from `address` (a loopback address other than 127.0.0.1)."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=server.url, transport=transport, timeout=30) as client:
        yield client


def failure_rows(database_url: str) -> int:
    ((count,),) = run_db(database_url, select(func.count()).select_from(auth_failures))
    return int(count)


# -- 29.4: one party's failures do not deny the legitimate holder -----------------------------------


def test_a_tenant_guessing_the_admin_secret_does_not_lock_the_admin_out(fresh_database_url: str) -> None:
    with CatalogThread(fresh_database_url) as server:
        admin = credentials(server.admin_client_id, server.admin_client_secret)
        wrong = credentials(server.admin_client_id, "guess")
        with client_from("127.0.0.2", server) as attacker:
            statuses = [attacker.post(TOKEN_PATH, data=wrong).status_code for _ in range(14)]
            assert statuses == [401] * 10 + [429] * 4
            # Over its limit for that id, the address is not checked at all until the window ends:
            # the right secret from it is refused too (what keeps guessing bounded).
            refused = attacker.post(TOKEN_PATH, data=admin)
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) > 0
        # The admin, from any other address, is not affected, through every channel.
        for address in ("127.0.0.1", "127.0.0.3"):
            with client_from(address, server) as admin_client:
                granted = admin_client.post(TOKEN_PATH, data=admin)
                assert granted.status_code == 200, granted.text
                token = granted.json()["access_token"]
                assert admin_client.get("/v1/config", headers=bearer(token)).status_code == 200
                basic = admin_client.post(
                    TOKEN_PATH,
                    data={"grant_type": "client_credentials"},
                    auth=(server.admin_client_id, server.admin_client_secret),
                )
                assert basic.status_code == 200, basic.text
        # The console's sign-in follows the same rules.
        console = Browser(server.url)
        try:
            signed_in = console.post(
                "/console/sign-in",
                {"client_id": server.admin_client_id, "client_secret": server.admin_client_secret},
            )
            assert signed_in.status_code == 303, signed_in.text
        finally:
            console.close()


def test_guessing_from_many_addresses_stays_bounded(fresh_database_url: str) -> None:
    limit = 2  # per address; the id is locked down at LOCKDOWN_FACTOR x 2 = 20 failures in all
    env = {"FLOE_AUTH_FAILURE_LIMIT": str(limit)}
    lockdown = auth_failures_module.LOCKDOWN_FACTOR * limit
    with CatalogThread(fresh_database_url, env=env) as server:
        client_id, client_secret = new_key(server)
        wrong = credentials(client_id, "guess")
        checked: Counter[int] = Counter()
        addresses = [f"127.0.0.{i}" for i in range(2, 2 + lockdown // limit)]
        for address in addresses:
            with client_from(address, server) as attacker:
                answers = [attacker.post(TOKEN_PATH, data=wrong).status_code for _ in range(limit + 1)]
                assert answers == [401] * limit + [429]
                checked.update(answers)
        # Locked down: each further address gets one wrong guess per window, not `limit`.
        later = [f"127.0.1.{i}" for i in range(1, 6)]
        for address in later:
            with client_from(address, server) as attacker:
                answers = [attacker.post(TOKEN_PATH, data=wrong).status_code for _ in range(3)]
                assert answers == [401, 429, 429]
                checked.update(answers)
        assert checked[401] == lockdown + len(later)
        # The right secret from an address without failures still passes during the lockdown.
        with client_from("127.0.2.1", server) as holder:
            granted = holder.post(TOKEN_PATH, data=credentials(client_id, client_secret))
            assert granted.status_code == 200, granted.text


def test_unknown_and_known_client_ids_are_answered_alike(fresh_database_url: str) -> None:
    """Counted per address either way: the answers do not tell whether a client id exists."""
    with CatalogThread(fresh_database_url) as server:
        client_id, _ = new_key(server)
        with client_from("127.0.0.2", server) as attacker:
            known = [
                attacker.post(TOKEN_PATH, data=credentials(client_id, "x")).status_code for _ in range(12)
            ]
            unknown = [
                attacker.post(TOKEN_PATH, data=credentials("nobody_at_all", "x")).status_code
                for _ in range(12)
            ]
        assert known == unknown == [401] * 10 + [429] * 2


# -- 29.8: unauthenticated requests cannot grow the failure table without bound ---------------------


def test_random_client_ids_leave_a_bounded_failure_table(fresh_database_url: str) -> None:
    env = {"FLOE_AUTH_FAILURE_WINDOW_SECONDS": "3600"}  # one window for the whole test
    with CatalogThread(fresh_database_url, env=env) as server:
        with client_from("127.0.0.2", server) as attacker:
            statuses = Counter(
                attacker.post(TOKEN_PATH, data=credentials(f"random_{uuid.uuid4().hex}", "x")).status_code
                for _ in range(500)
            )
        # The address's first 100 failures are answered 401, the rest 429 (auth_source_failure_limit).
        assert statuses == Counter({401: 100, 429: 400})
        # 100 client ids of that address and the address itself, not 501 rows.
        assert failure_rows(fresh_database_url) <= 101


def test_failure_counters_expire_and_the_table_has_a_cap(
    fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth_failures_module, "MAX_FAILURE_ROWS", 30)
    env = {"FLOE_AUTH_FAILURE_WINDOW_SECONDS": "1"}
    with CatalogThread(fresh_database_url, env=env) as server:
        for i in range(2, 22):
            with client_from(f"127.0.0.{i}", server) as attacker:
                for _ in range(3):
                    answer = attacker.post(TOKEN_PATH, data=credentials(f"random_{uuid.uuid4().hex}", "x"))
                    assert answer.status_code == 401
        # 20 addresses x (3 client ids + the address) would be 80 rows: the cap holds it (one insert in
        # flight may pass it).
        assert failure_rows(fresh_database_url) <= 31
        time.sleep(1.5)  # the windows end
        with client_from("127.0.0.2", server) as attacker:
            assert attacker.post(TOKEN_PATH, data=credentials("nobody", "x")).status_code == 401
        # Counters whose window ended were deleted with that failure.
        assert failure_rows(fresh_database_url) <= 2


# -- 29.6: malformed tokens are 401 everywhere ------------------------------------------------------


def b64(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode()


def unsigned(header: object, payload: object = None) -> str:
    body = json.dumps(payload if payload is not None else {"sub": "x"}).encode()
    return f"{b64(json.dumps(header).encode())}.{b64(body)}.{b64(b'signature')}"


def signed_with_server_key(database_url: str, payload: bytes, header: dict[str, object] | None = None) -> str:
    ((kid, private_jwk),) = run_db(
        database_url,
        select(signing_keys.c.kid, signing_keys.c.private_jwk)
        .where(signing_keys.c.retired_at.is_(None))
        .order_by(signing_keys.c.created_at.desc())
        .limit(1),
    )
    protected = {"alg": "ES256", "kid": kid, "typ": "JWT", **(header or {})}
    key = ECKey.import_key(json.loads(private_jwk))
    return jws.serialize_compact(protected, payload, key, algorithms=["ES256"])


def malformed_tokens(database_url: str, subject: str) -> dict[str, str]:
    now = int(time.time())
    empty, junk = b64(b"{}"), b64(b"s")
    good = {"sub": subject, "iss": "floe", "iat": now, "nbf": now - 5, "exp": now + 600, "jti": "j"}
    tokens = {
        f"header {value!r}": unsigned(value) for value in ([], "x", None, 1, 1.5, True, [{"alg": "ES256"}])
    }
    tokens |= {
        "kid list": unsigned({"alg": "ES256", "kid": []}),
        "kid object": unsigned({"alg": "ES256", "kid": {"a": 1}}),
        "kid null": unsigned({"alg": "ES256", "kid": None}),
        "kid number": unsigned({"alg": "ES256", "kid": 7}),
        "kid unknown": unsigned({"alg": "ES256", "kid": "floe-nobody"}),
        "alg list": unsigned({"alg": ["ES256"], "kid": "k"}),
        "alg none": unsigned({"alg": "none", "kid": "k"}),
        "deep header": f"{b64(b'[' * 5000 + b']' * 5000)}.{empty}.{junk}",
        "not base64": "!!!.@@@.###",
        "not utf-8": f"{b64(bytes([0xFF, 0xFE, 0xFD]))}.{empty}.{junk}",
        "not json": f"{b64(b'{alg')}.{empty}.{junk}",
        "one segment": b64(b'{"alg":"ES256"}'),
        "two segments": f"{empty}.{empty}",
        "empty segments": "..",
        "four segments": "a.b.c.d",
        "huge": "a" * 20_000 + ".b.c",
        "payload list": signed_with_server_key(database_url, b"[]"),
        "payload string": signed_with_server_key(database_url, b'"x"'),
        "payload null": signed_with_server_key(database_url, b"null"),
        "payload not json": signed_with_server_key(database_url, b"{nope"),
        "deep payload": signed_with_server_key(database_url, b"[" * 5000 + b"]" * 5000),
    }
    for claim, value in (
        ("exp", "soon"),
        ("exp", None),
        ("exp", [1]),
        ("exp", True),
        ("iat", "yesterday"),
        ("iat", {"a": 1}),
        ("iat", None),
        ("sub", 5),
        ("sub", ["a"]),
        ("jti", 5),
        ("jti", {"a": 1}),
        ("nbf", "x"),
    ):
        payload = json.dumps({**good, claim: value}).encode()
        tokens[f"{claim}={value!r}"] = signed_with_server_key(database_url, payload)
    tokens["exp NaN"] = signed_with_server_key(
        database_url, json.dumps({**good, "exp": float("nan")}).encode()
    )
    return tokens


def test_malformed_tokens_are_401_on_every_route(catalog_server: CatalogProcess, database_url: str) -> None:
    tokens = malformed_tokens(database_url, catalog_server.admin_client_id)
    with httpx.Client(base_url=catalog_server.url, timeout=30, follow_redirects=False) as http:
        for name, token in tokens.items():
            for path in (
                "/v1/config",
                "/v1/default/namespaces/a/tables/b",
                "/v1/default/namespaces/a/tables",
            ):
                refused = http.get(path, headers=bearer(token))
                assert refused.status_code == 401, (name, path, refused.text)
                assert refused.json()["error"]["code"] == 401, (name, path)
            exchange = http.post(
                TOKEN_PATH, data={"grant_type": EXCHANGE, "subject_token": token, "scope": "catalog"}
            )
            assert exchange.status_code in (400, 401), (name, exchange.text)
            assert exchange.json()["error"] in ("invalid_client", "invalid_request"), name
            http.cookies.set(SESSION_COOKIE, token, path="/console")
            console = http.get("/console")
            assert console.status_code == 303, (name, console.text)
            assert console.headers["location"] == "/console/sign-in"
            http.cookies.clear()


# -- 29.10: sign-out ends the token -----------------------------------------------------------------


def test_sign_out_revokes_the_sessions_token(catalog_server: CatalogProcess) -> None:
    client_id, client_secret = new_key(catalog_server, role="reader")
    engine_token = catalog_server.token(client_id, client_secret)
    browser = Browser(catalog_server.url)
    try:
        signed_in = browser.post("/console/sign-in", {"client_id": client_id, "client_secret": client_secret})
        assert signed_in.status_code == 303, signed_in.text
        token = browser.http.cookies[SESSION_COOKIE]
        assert token != engine_token  # a session's token of its own
        with httpx.Client(base_url=catalog_server.url, timeout=30) as http:
            assert http.get("/v1/config", headers=bearer(token)).status_code == 200
            assert browser.get("/console").status_code == 200

            assert browser.post("/console/sign-out").status_code == 303

            # A copy of the old cookie opens nothing, as a cookie or as a bearer token.
            browser.http.cookies.set(SESSION_COOKIE, token, path="/console")
            again = browser.get("/console")
            assert again.status_code == 303
            assert again.headers["location"] == "/console/sign-in"
            for path in (
                "/v1/config",
                "/v1/default/namespaces/a/tables/b",
                "/v1/default/namespaces/a/tables",
            ):
                refused = http.get(path, headers=bearer(token))
                assert refused.status_code == 401, (path, refused.text)
            exchange = http.post(TOKEN_PATH, data={"grant_type": EXCHANGE, "subject_token": token})
            assert exchange.status_code == 401, exchange.text
            # The key's other tokens (an engine's) and new sign-ins are not affected.
            assert http.get("/v1/config", headers=bearer(engine_token)).status_code == 200
            assert http.get(
                "/v1/config", headers=bearer(catalog_server.token(client_id, client_secret))
            ).is_success
    finally:
        browser.close()


def test_a_key_with_too_many_revoked_tokens_ends_all_its_earlier_tokens(
    catalog_server: CatalogProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Revocations stay bounded per key: past the cap, a sign-out ends every token of the key issued so
    far (one row) instead of adding another row."""
    monkeypatch.setattr(security_module, "MAX_REVOKED_TOKENS_PER_KEY", 2)
    client_id, client_secret = new_key(catalog_server, role="reader")
    key = {"client_id": client_id, "client_secret": client_secret}
    ended = []
    for _ in range(3):
        browser = Browser(catalog_server.url)
        try:
            assert browser.post("/console/sign-in", key).status_code == 303
            ended.append(browser.http.cookies[SESSION_COOKIE])
            assert browser.post("/console/sign-out").status_code == 303
        finally:
            browser.close()
    assert catalog_server.database_url is not None
    rows = run_db(
        catalog_server.database_url,
        select(revoked_tokens.c.jti).where(revoked_tokens.c.subject == client_id),
    )
    jtis = sorted(row[0] for row in rows)
    assert len(jtis) == 3, jtis
    assert jtis[0] == "*", jtis
    with httpx.Client(base_url=catalog_server.url, timeout=30) as http:
        for token in ended:
            assert http.get("/v1/config", headers=bearer(token)).status_code == 401
        time.sleep(1.1)  # tokens carry whole seconds: a token of the next second is not covered
        browser = Browser(catalog_server.url)
        try:
            assert browser.post("/console/sign-in", key).status_code == 303
            fresh = browser.http.cookies[SESSION_COOKIE]
            assert http.get("/v1/config", headers=bearer(fresh)).status_code == 200
        finally:
            browser.close()


def test_malformed_tokens_naming_the_external_issuer_are_401(fresh_database_url: str) -> None:
    """With FLOE_OIDC_ISSUER set, a token whose unverified `iss` names the issuer goes to its verifier:
    junk there is a 401 too."""
    env = {"FLOE_OIDC_AUDIENCE": "floe", "FLOE_OIDC_JWKS_MIN_REFRESH_SECONDS": "0.1"}
    with (
        MockOAuth2Server() as idp,
        CatalogThread(fresh_database_url, env={**env, "FLOE_OIDC_ISSUER": idp.issuer}) as server,
    ):
        # The issuer's keys are fetched (a start-up fetch may have met the issuer still starting).
        deadline = time.monotonic() + 30
        while httpx.get(f"{server.url}/v1/config", headers=bearer(idp.token())).status_code == 503:
            assert time.monotonic() < deadline, "the issuer's keys could not be fetched"
            time.sleep(0.2)
        claims = {"iss": idp.issuer, "sub": "x", "aud": "floe"}
        deep = b64(b"[" * 5000 + b"]" * 5000)
        headers: list[object] = [[], None, "x", 1, {"alg": ["RS256"]}, {"alg": "RS256", "kid": []}]
        tokens = [unsigned(header, claims) for header in headers]
        tokens += [
            f"{deep}.{b64(json.dumps(claims).encode())}.{b64(b's')}",
            f"{b64(b'{}')}.{deep}.{b64(b's')}",
            unsigned({"alg": "RS256", "kid": "nope"}, claims),
            unsigned({"alg": "none"}, claims),
        ]
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for token in tokens:
                for path in ("/v1/config", "/v1/default/namespaces/a/tables/b"):
                    refused = http.get(path, headers=bearer(token))
                    assert refused.status_code == 401, (token[:80], path, refused.text)
