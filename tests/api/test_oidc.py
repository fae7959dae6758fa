"""An external identity provider with real components: navikt's mock-oauth2-server (a standalone OpenID
Connect issuer in a JVM, `tests/api/oidc_provider.py`) issues the tokens, floe servers on
SQLite and PostgreSQL verify them through discovery and JWKS, pyiceberg and raw HTTP use them."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pyarrow as pa
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey, RSAKey
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, NoSuchNamespaceError, NoSuchTableError

from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread
from tests.api.oidc_provider import ISSUER_ID, MockOAuth2Server
from tests.conftest import new_database_url

AUDIENCE = "floe-catalog"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})


@pytest.fixture(scope="module")
def idp() -> Iterator[MockOAuth2Server]:
    """One issuer (RS256) for the module, shared by both backends."""
    with MockOAuth2Server() as server:
        yield server


@pytest.fixture(scope="module")
def oidc_catalog(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    idp: MockOAuth2Server,
) -> Iterator[CatalogProcess]:
    """floe accepting the issuer's tokens for audience `AUDIENCE`, with the default claim names."""
    url = new_database_url(backend, request, tmp_path_factory.mktemp("oidc-db"))
    env = {"FLOE_OIDC_ISSUER": idp.issuer, "FLOE_OIDC_AUDIENCE": AUDIENCE}
    with CatalogThread(url, env=env) as server:
        yield server


@pytest.fixture
def admin(oidc_catalog: CatalogProcess) -> Iterator[httpx.Client]:
    """floe's own bootstrap admin (API key), to set the scene."""
    headers = bearer(oidc_catalog.token())
    with httpx.Client(base_url=oidc_catalog.url, headers=headers, timeout=30) as client:
        yield client


@dataclass(frozen=True)
class TwoClusters:
    a: str
    b: str


def create_clusters(server: CatalogProcess, http: httpx.Client) -> TwoClusters:
    names = []
    for _ in range(2):
        name = f"kafka_{uuid.uuid4().hex[:8]}"
        assert http.post("/management/v1/clusters", json={"name": name}).status_code == 201
        server.catalog().create_table(f"{name}.events", schema=ROWS.schema).append(ROWS)
        names.append(name)
    return TwoClusters(*names)


@pytest.fixture
def clusters(oidc_catalog: CatalogProcess, admin: httpx.Client) -> TwoClusters:
    return create_clusters(oidc_catalog, admin)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def external_catalog(server: CatalogProcess, token: str) -> RestCatalog:
    """pyiceberg authenticated with nothing but the external token (`token` property)."""
    return RestCatalog("oidc", uri=server.url, token=token)


def claims_of(token: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    return payload


def b64(obj: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def assert_unauthorized(response: httpx.Response, message: str) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    error = response.json()["error"]
    assert error["type"] == "NotAuthorizedException"
    assert message in error["message"], error["message"]


# -- accepted tokens ----------------------------------------------------------------------------------


def test_external_token_sees_exactly_its_cluster(
    oidc_catalog: CatalogProcess, idp: MockOAuth2Server, clusters: TwoClusters, admin: httpx.Client
) -> None:
    client_id = f"ingest-{uuid.uuid4().hex[:6]}"
    token = idp.token(client_id, cluster=clusters.a, role="writer", token_audience=AUDIENCE)
    assert claims_of(token)["iss"] == idp.issuer
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["alg"] == "RS256"

    catalog = external_catalog(oidc_catalog, token)
    assert catalog.list_namespaces() == [(clusters.a,)]
    table = catalog.load_table(f"{clusters.a}.events")
    assert table.scan().to_arrow().num_rows == 3
    table.append(pa.table({"id": pa.array([4], pa.int64())}))
    assert catalog.load_table(f"{clusters.a}.events").scan().to_arrow().num_rows == 4
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{clusters.b}.events")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables(clusters.b)
    with pytest.raises(ForbiddenError):  # a writer may not drop
        catalog.drop_table(f"{clusters.a}.events")

    with httpx.Client(base_url=oidc_catalog.url, headers=bearer(token)) as http:
        config = http.get("/v1/config", params={"warehouse": "default"})
        assert config.status_code == 200, config.text
        assert http.get("/v1/default/namespaces").json()["namespaces"] == [[clusters.a]]
        other = http.get(f"/v1/default/namespaces/{clusters.b}/tables/events")
        assert other.status_code == 404
        assert other.json()["error"]["type"] == "NoSuchTableException"
        assert http.get("/management/v1/keys").status_code == 403

    audit = admin.get("/management/v1/audit", params={"cluster": clusters.a, "limit": 1000}).json()
    commits = [e for e in audit["entries"] if e["subject"] == f"oidc:{client_id}"]
    assert any(e["action"] == "updateTable" and e["outcome"] == "ok" for e in commits), commits
    assert any(e["action"] == "dropTable" and e["outcome"] == "denied" for e in commits), commits


def test_reader_claim_cannot_commit(
    oidc_catalog: CatalogProcess, idp: MockOAuth2Server, clusters: TwoClusters, admin: httpx.Client
) -> None:
    token = idp.token(cluster=clusters.a, role="reader", token_audience=AUDIENCE)
    catalog = external_catalog(oidc_catalog, token)
    table = catalog.load_table(f"{clusters.a}.events")
    assert table.scan().to_arrow().num_rows == 3
    before = table.metadata_location
    with pytest.raises(ForbiddenError):
        table.append(pa.table({"id": pa.array([4], pa.int64())}))
    with pytest.raises(ForbiddenError):
        catalog.create_table(f"{clusters.a}.more", schema=ROWS.schema)
    commit = httpx.post(
        f"{oidc_catalog.url}/v1/default/namespaces/{clusters.a}/tables/events",
        json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"x": "y"}}]},
        headers=bearer(token),
    )
    assert commit.status_code == 403, commit.text
    assert commit.json()["error"]["type"] == "ForbiddenException"
    after = admin.get(f"/v1/default/namespaces/{clusters.a}/tables/events").json()
    assert after["metadata-location"] == before
    assert "x" not in after["metadata"].get("properties", {})


def test_admin_claim_without_cluster_is_a_global_admin(
    oidc_catalog: CatalogProcess, idp: MockOAuth2Server, clusters: TwoClusters
) -> None:
    token = idp.token(role="admin", token_audience=AUDIENCE)
    assert "floe_cluster" not in claims_of(token)
    catalog = external_catalog(oidc_catalog, token)
    assert {(clusters.a,), (clusters.b,)} <= set(catalog.list_namespaces())
    assert catalog.load_table(f"{clusters.b}.events").scan().to_arrow().num_rows == 3
    name = f"kafka_{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=oidc_catalog.url, headers=bearer(token)) as http:
        assert http.post("/management/v1/clusters", json={"name": name}).status_code == 201
        assert name in {c["name"] for c in http.get("/management/v1/clusters").json()["clusters"]}
    # A writer claim without a cluster is no administrator: refused, not served as one.
    writer = idp.token(role="writer", token_audience=AUDIENCE)
    refused = httpx.get(f"{oidc_catalog.url}/v1/default/namespaces", headers=bearer(writer))
    assert_unauthorized(refused, "only a global admin token may omit it")


def test_a_cluster_admin_claim_manages_only_its_cluster(
    oidc_catalog: CatalogProcess, idp: MockOAuth2Server, clusters: TwoClusters
) -> None:
    token = idp.token(cluster=clusters.a, role="admin", token_audience=AUDIENCE)
    with httpx.Client(base_url=oidc_catalog.url, headers=bearer(token)) as http:
        created = http.post("/management/v1/keys", json={"cluster": clusters.a, "role": "reader"})
        assert created.status_code == 201, created.text
        assert created.json()["created_by"] == f"oidc:{claims_of(token)['sub']}"
        assert (
            http.post("/management/v1/keys", json={"cluster": clusters.b, "role": "reader"}).status_code
            == 403
        )
        assert http.post("/management/v1/clusters", json={"name": "nope"}).status_code == 403
    external_catalog(oidc_catalog, token).drop_table(f"{clusters.a}.events")


# -- refused tokens -----------------------------------------------------------------------------------


def _forged(idp: MockOAuth2Server, cluster: str) -> dict[str, tuple[str, str]]:
    """label -> (token, the 401 message's gist); every one of them names a real cluster."""
    real = idp.token(cluster=cluster, role="reader", token_audience=AUDIENCE)
    header_b64, payload_b64, signature = real.split(".")
    claims = claims_of(real)
    fresh = {**claims, "exp": int(time.time()) + 600, "jti": uuid.uuid4().hex}
    stranger = RSAKey.generate_key(2048, parameters={"kid": "not-published"})
    impostor = RSAKey.generate_key(2048, parameters={"kid": ISSUER_ID})
    public_jwk = json.dumps(idp.jwks()["keys"][0]).encode()
    flipped = signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")
    return {
        "wrong audience": (
            idp.token(cluster=cluster, role="writer", token_audience="another-service"),
            f"audience is not {AUDIENCE}",
        ),
        "another issuer": (
            idp.token(issuer=idp.other_issuer, cluster=cluster, role="admin", token_audience=AUDIENCE),
            "Invalid token",
        ),
        "expired": (
            idp.token(cluster=cluster, role="writer", token_audience=AUDIENCE, expired="1"),
            "expired",
        ),
        "not valid yet": (
            idp.token(cluster=cluster, role="writer", token_audience=AUDIENCE, not_before="1"),
            "not valid yet",
        ),
        "unknown key id": (
            jwt.encode({"alg": "RS256", "kid": "not-published"}, fresh, stranger),
            "unknown signing key",
        ),
        "the issuer's key id, another key": (
            jwt.encode({"alg": "RS256", "kid": ISSUER_ID}, fresh, impostor),
            "bad signature",
        ),
        "tampered payload": (
            f"{header_b64}.{b64({**claims, 'floe_role': 'admin'})}.{signature}",
            "bad signature",
        ),
        "tampered signature": (f"{header_b64}.{payload_b64}.{flipped}", "bad signature"),
        "alg none": (f"{b64({'alg': 'none', 'typ': 'JWT'})}.{payload_b64}.", "algorithm not accepted"),
        "HS256 keyed with the public key": (
            jwt.encode(
                {"alg": "HS256", "kid": ISSUER_ID}, fresh, OctKey.import_key(public_jwk), algorithms=["HS256"]
            ),
            "algorithm not accepted",
        ),
        "unknown cluster": (
            idp.token(cluster="no_such_cluster", role="admin", token_audience=AUDIENCE),
            "Cluster no_such_cluster named by the token's floe_cluster claim does not exist",
        ),
        "unknown role": (
            idp.token(cluster=cluster, role="superuser", token_audience=AUDIENCE),
            "floe_role claim names no floe role",
        ),
    }


def test_invalid_external_tokens_are_refused_and_change_nothing(
    oidc_catalog: CatalogProcess, idp: MockOAuth2Server, clusters: TwoClusters, admin: httpx.Client
) -> None:
    for label, (token, message) in _forged(idp, clusters.a).items():
        child = f"forged_{uuid.uuid4().hex[:6]}"
        response = httpx.post(
            f"{oidc_catalog.url}/v1/default/namespaces",
            json={"namespace": [clusters.a, child]},
            headers=bearer(token),
        )
        assert response.status_code == 401, (label, response.text)
        assert_unauthorized(response, message)
        listing = httpx.get(f"{oidc_catalog.url}/v1/default/namespaces", headers=bearer(token))
        assert listing.status_code == 401, label
        assert admin.get(f"/v1/default/namespaces/{clusters.a}%1F{child}").status_code == 404, label
        with pytest.raises(Exception, match=r"401|Unauthorized|NotAuthorized"):
            external_catalog(oidc_catalog, token).list_namespaces()
    # Nothing above disturbed the valid tokens.
    valid = idp.token(cluster=clusters.a, role="reader", token_audience=AUDIENCE)
    assert external_catalog(oidc_catalog, valid).list_namespaces() == [(clusters.a,)]


def test_the_token_endpoint_does_not_exchange_external_tokens(
    oidc_catalog: CatalogProcess, idp: MockOAuth2Server, clusters: TwoClusters
) -> None:
    token = idp.token(cluster=clusters.a, role="admin", token_audience=AUDIENCE)
    exchanged = httpx.post(
        f"{oidc_catalog.url}/v1/oauth/tokens",
        data={"grant_type": EXCHANGE, "subject_token": token, "subject_token_type": ACCESS_TOKEN_TYPE},
        headers=bearer(token),
    )
    assert exchanged.status_code == 401, exchanged.text
    assert exchanged.json()["error"] == "invalid_client"
    # floe's own tokens keep working beside the external ones.
    assert httpx.get(f"{oidc_catalog.url}/v1/config", headers=bearer(oidc_catalog.token())).status_code == 200


def test_tokens_are_not_logged(
    oidc_catalog: CatalogProcess, idp: MockOAuth2Server, clusters: TwoClusters
) -> None:
    tokens = [
        idp.token(cluster=clusters.a, role=role, token_audience=AUDIENCE) for role in ("reader", "nobody")
    ]
    for token in tokens:
        httpx.get(f"{oidc_catalog.url}/v1/default/namespaces", headers=bearer(token))
    log = oidc_catalog.log_text()
    assert f"OIDC issuer {idp.issuer}: 1 signing keys loaded" in log
    assert not [t for t in tokens if t in log or t.split(".")[2] in log]


# -- configuration: claim names, role values, no audience ----------------------------------------------


def test_custom_claims_and_role_values(fresh_database_url: str, idp: MockOAuth2Server) -> None:
    env = {
        "FLOE_OIDC_ISSUER": idp.issuer,
        "FLOE_OIDC_CLUSTER_CLAIM": "kafka.cluster_id",
        "FLOE_OIDC_ROLE_CLAIM": "realm_access.roles",
        "FLOE_OIDC_ROLE_VALUES": "catalog-readers=reader,catalog-writers=writer,catalog-owners=admin",
    }
    with (
        CatalogThread(fresh_database_url, env=env) as server,
        httpx.Client(base_url=server.url, headers=bearer(server.token())) as admin,
    ):
        assert "FLOE_OIDC_AUDIENCE is not set" in server.log_text()
        t = create_clusters(server, admin)
        # floe_role says admin, but the role claim is realm_access.roles now.
        reader = idp.token(cluster=t.a, group="catalog-readers", role="admin", token_audience="anything")
        catalog = external_catalog(server, reader)
        assert catalog.list_namespaces() == [(t.a,)]
        with pytest.raises(ForbiddenError):
            catalog.load_table(f"{t.a}.events").append(ROWS)
        writer = idp.token(cluster=t.b, group="catalog-writers", token_audience="anything")
        external_catalog(server, writer).load_table(f"{t.b}.events").append(ROWS)
        assert server.catalog().load_table(f"{t.b}.events").scan().to_arrow().num_rows == 6
        # Values outside FLOE_OIDC_ROLE_VALUES grant nothing, floe's own role names included.
        unmapped = idp.token(cluster=t.a, group="admin", token_audience="anything")
        assert_unauthorized(
            httpx.get(f"{server.url}/v1/default/namespaces", headers=bearer(unmapped)),
            "realm_access.roles claim names no floe role",
        )
        owner = idp.token(group="catalog-owners", token_audience="anything")
        assert {(t.a,), (t.b,)} <= set(external_catalog(server, owner).list_namespaces())


# -- the issuer's keys --------------------------------------------------------------------------------


def _wait_until(check: Any, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.25)


def test_issuer_outage_and_key_rotation(fresh_database_url: str) -> None:
    """floe starts while the issuer is down (API keys work, external tokens answer 503), picks the
    issuer's keys up once it is there, and follows the issuer to a new key."""
    old_key = ECKey.generate_key("P-256", private=True)
    new_key = ECKey.generate_key("P-256", private=True)
    first = MockOAuth2Server(algorithm="ES256", signing_key=old_key.as_dict(private=True))
    env = {
        "FLOE_OIDC_ISSUER": first.issuer,
        "FLOE_OIDC_AUDIENCE": AUDIENCE,
        "FLOE_OIDC_JWKS_MIN_REFRESH_SECONDS": "1",
    }
    with (
        CatalogThread(fresh_database_url, env=env) as server,
        httpx.Client(base_url=server.url, headers=bearer(server.token())) as admin,
    ):
        cluster = create_clusters(server, admin).a
        claims = {
            "iss": first.issuer,
            "sub": "engine",
            "aud": AUDIENCE,
            "floe_cluster": cluster,
            "floe_role": "reader",
            "exp": int(time.time()) + 600,
        }

        def signed_by(key: ECKey) -> str:
            return jwt.encode({"alg": "ES256", "kid": ISSUER_ID}, {**claims, "jti": uuid.uuid4().hex}, key)

        def status(token: str) -> int:
            return httpx.get(f"{server.url}/v1/default/namespaces", headers=bearer(token)).status_code

        down = httpx.get(f"{server.url}/v1/default/namespaces", headers=bearer(signed_by(old_key)))
        assert down.status_code == 503, down.text
        assert down.json()["error"]["type"] == "ServiceUnavailableException"
        assert admin.get("/v1/default/namespaces").status_code == 200

        with first:
            before = first.token(cluster=cluster, role="reader", token_audience=AUDIENCE)
            assert _wait_until(lambda: status(before) == 200), "the issuer's keys were never fetched"
            assert external_catalog(server, before).list_namespaces() == [(cluster,)]
            assert status(signed_by(new_key)) == 401

        # The issuer restarts on the same address with a new key (same key id, as this issuer does).
        with MockOAuth2Server(
            first.port, algorithm="ES256", signing_key=new_key.as_dict(private=True)
        ) as second:
            assert second.jwks()["keys"][0]["x"] == new_key.as_dict()["x"]
            after = second.token(cluster=cluster, role="reader", token_audience=AUDIENCE)
            assert _wait_until(lambda: status(after) == 200), "the rotated key was never picked up"
            assert external_catalog(server, after).list_namespaces() == [(cluster,)]
            # Tokens of the withdrawn key no longer verify (a new one: not in floe's short cache).
            assert status(signed_by(old_key)) == 401
            assert status(signed_by(new_key)) == 200
