"""Security with real clients: the token endpoint, API keys per cluster, authorization on every route,
key lifecycle, signing-key rotation, rate limiting, bootstrap, audit log, the CLI, and an attack matrix
in which every refusal leaves the catalog unchanged."""

from __future__ import annotations

import base64
import json
import stat
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pyarrow as pa
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, NoSuchNamespaceError, NoSuchTableError

from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread

TOKEN_PATH = "/v1/oauth/tokens"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
SECRETS_SEEN: set[str] = set()


@dataclass(frozen=True)
class Key:
    client_id: str
    client_secret: str

    @property
    def credential(self) -> str:
        return f"{self.client_id}:{self.client_secret}"


def token_for(server: CatalogProcess, key: Key) -> str:
    token = server.token(key.client_id, key.client_secret)
    SECRETS_SEEN.add(token)
    return token


def management(http: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
    response = http.request(method, f"/management/v1{path}", **kwargs)
    assert response.status_code < 400, response.text
    return response.json() if response.content else None


def new_cluster(http: httpx.Client) -> str:
    name = f"kafka_{uuid.uuid4().hex[:8]}"
    created = management(http, "POST", "/clusters", json={"name": name})
    assert created["namespace"] == [name]
    return name


def new_key(http: httpx.Client, cluster: str | None, role: str, **extra: Any) -> Key:
    created = management(http, "POST", "/keys", json={"cluster": cluster, "role": role, **extra})
    SECRETS_SEEN.add(created["client_secret"])
    return Key(created["client_id"], created["client_secret"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_iceberg_error(response: httpx.Response, status: int, error_type: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["type"] == error_type
    assert response.json()["error"]["code"] == status


# -- the token endpoint -----------------------------------------------------------------------------


def test_token_from_form_and_basic_credentials(catalog_server: CatalogProcess) -> None:
    form = {
        "grant_type": "client_credentials",
        "client_id": catalog_server.admin_client_id,
        "client_secret": catalog_server.admin_client_secret,
        "scope": "catalog",
    }
    body = httpx.post(f"{catalog_server.url}{TOKEN_PATH}", data=form)
    assert body.status_code == 200, body.text
    answer = body.json()
    assert answer["token_type"] == "bearer"
    # A token signed for this key within the last minute is answered again, with the lifetime it has left.
    assert 3600 - 60 <= answer["expires_in"] <= 3600
    assert answer["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    header = json.loads(base64.urlsafe_b64decode(answer["access_token"].split(".")[0] + "=="))
    assert header["alg"] == "ES256"
    assert header["kid"]

    # HTTP Basic (DuckDB, pyiceberg auth.type=oauth2), any scope.
    for scope in ("PRINCIPAL_ROLE:ALL", None):
        data = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
        basic = httpx.post(
            f"{catalog_server.url}{TOKEN_PATH}",
            data=data,
            auth=(catalog_server.admin_client_id, catalog_server.admin_client_secret),
        )
        assert basic.status_code == 200, basic.text
        assert httpx.get(
            f"{catalog_server.url}/v1/config", headers=bearer(basic.json()["access_token"])
        ).is_success


@pytest.mark.parametrize(
    ("data", "auth", "status", "error"),
    [
        ({"grant_type": "client_credentials", "client_id": "floe-admin", "client_secret": "wrong"}, None, 401,
         "invalid_client"),
        ({"grant_type": "client_credentials", "client_id": "nobody", "client_secret": "x"}, None, 401,
         "invalid_client"),
        ({"grant_type": "client_credentials"}, ("nobody", "x"), 401, "invalid_client"),
        ({"client_id": "floe-admin", "client_secret": "x"}, None, 400, "invalid_request"),
        ({"grant_type": "password", "username": "a", "password": "b"}, None, 400, "unsupported_grant_type"),
        ({"grant_type": "client_credentials", "client_id": "floe-admin"}, None, 400, "invalid_request"),
        ({"grant_type": EXCHANGE}, None, 400, "invalid_request"),
        ({"grant_type": EXCHANGE, "subject_token": "garbage"}, None, 401, "invalid_client"),
    ],
)  # fmt: skip
def test_token_endpoint_errors(
    catalog_server: CatalogProcess,
    data: dict[str, str],
    auth: tuple[str, str] | None,
    status: int,
    error: str,
) -> None:
    response = httpx.post(f"{catalog_server.url}{TOKEN_PATH}", data=data, auth=auth)
    assert response.status_code == status, response.text
    assert response.json()["error"] == error
    assert response.json()["error_description"]
    assert "access_token" not in response.json()
    if status == 401 and auth is not None:
        assert response.headers["www-authenticate"].startswith("Basic")


def test_token_exchange_refreshes_a_token(catalog_server: CatalogProcess) -> None:
    first = catalog_server.token()
    exchanged = httpx.post(
        f"{catalog_server.url}{TOKEN_PATH}",
        data={
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": first,
            "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "scope": "catalog",
        },
        headers=bearer(first),
    )
    assert exchanged.status_code == 200, exchanged.text
    second = exchanged.json()["access_token"]
    assert second != first
    assert httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(second)).status_code == 200


# -- authentication on every route --------------------------------------------------------------


def test_every_route_requires_a_token(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    endpoints = http.get("/v1/config").json()["endpoints"]
    routes = [e.split(" ", 1) for e in endpoints]
    routes += [["GET", "/v1/config"], ["GET", "/management/v1/clusters"], ["POST", "/management/v1/keys"],
               ["GET", "/management/v1/audit"], ["DELETE", "/management/v1/keys/{client_id}"]]  # fmt: skip
    filled = {"{prefix}": "default", "{namespace}": "ns", "{table}": "t", "{view}": "v", "{client_id}": "k"}
    for method, template in routes:
        path = template
        for placeholder, value in filled.items():
            path = path.replace(placeholder, value)
        for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic Zm9vOmJhcg=="}):
            response = httpx.request(method, f"{catalog_server.url}{path}", headers=headers, json={})
            assert response.status_code == 401, (method, path, response.status_code)
            assert response.headers["www-authenticate"].startswith("Bearer"), (method, path)
            if method != "HEAD":
                assert response.json()["error"]["type"] == "NotAuthorizedException"
    # Probes stay open for load balancers.
    assert httpx.get(f"{catalog_server.url}/healthz").status_code == 200
    assert httpx.get(f"{catalog_server.url}/readyz").status_code == 200


def _forged_tokens(real: str) -> dict[str, str]:
    header_b64, payload_b64, signature = real.split(".")
    payload = json.loads(base64.urlsafe_b64decode(payload_b64 + "=="))
    header = json.loads(base64.urlsafe_b64decode(header_b64 + "=="))

    def b64(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    other_key = ECKey.generate_key("P-256", parameters={"kid": header["kid"]})
    admin_payload = {**payload, "exp": int(time.time()) + 3600}
    flipped = signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")
    return {
        "tampered signature": f"{header_b64}.{payload_b64}.{flipped}",
        "tampered payload": f"{header_b64}.{b64({**payload, 'sub': 'someone-else'})}.{signature}",
        "alg none": f"{b64({'alg': 'none', 'typ': 'JWT'})}.{payload_b64}.",
        "signed with another key": jwt.encode(
            {"alg": "ES256", "kid": header["kid"]}, admin_payload, other_key
        ),
        "HS256 confusion": jwt.encode(
            {"alg": "HS256", "kid": header["kid"]},
            admin_payload,
            OctKey.import_key("floe"),
            algorithms=["HS256"],
        ),
        "truncated": f"{header_b64}.{payload_b64}",
    }


def test_forged_tokens_are_refused_and_change_nothing(
    catalog_server: CatalogProcess, http: httpx.Client
) -> None:
    real = catalog_server.token()
    for label, forged in _forged_tokens(real).items():
        name = f"forged_{uuid.uuid4().hex[:6]}"
        response = httpx.post(
            f"{catalog_server.url}/v1/default/namespaces", json={"namespace": [name]}, headers=bearer(forged)
        )
        assert response.status_code == 401, (label, response.text)
        assert_iceberg_error(http.get(f"/v1/default/namespaces/{name}"), 404, "NoSuchNamespaceException")


def test_expired_tokens_and_keys_are_refused(fresh_database_url: str) -> None:
    env = {"FLOE_TOKEN_LIFETIME_SECONDS": "2"}
    with CatalogThread(fresh_database_url, env=env) as server, httpx.Client(base_url=server.url) as admin:
        admin.headers.update(bearer(server.token()))
        cluster = new_cluster(admin)
        key = new_key(admin, cluster, "reader", expires_in_seconds=3)
        token = token_for(server, key)
        assert httpx.get(f"{server.url}/v1/config", headers=bearer(token)).status_code == 200
        time.sleep(3.5)
        expired = httpx.get(f"{server.url}/v1/config", headers=bearer(token))
        assert expired.status_code == 401
        refused = httpx.post(
            f"{server.url}{TOKEN_PATH}",
            data={
                "grant_type": "client_credentials",
                "client_id": key.client_id,
                "client_secret": key.client_secret,
            },
        )
        assert refused.status_code == 401
        assert refused.json()["error"] == "invalid_client"


# -- clusters, roles, isolation ---------------------------------------------------------------------


@dataclass
class TwoClusters:
    a: str
    b: str
    a_reader: Key
    a_writer: Key
    a_admin: Key
    b_writer: Key


@pytest.fixture
def two_clusters(catalog_server: CatalogProcess, http: httpx.Client) -> TwoClusters:
    return make_two_clusters(catalog_server, http)


def make_two_clusters(catalog_server: CatalogProcess, http: httpx.Client) -> TwoClusters:
    """Two clusters with a three-row `events` table each, and keys of both."""
    a, b = new_cluster(http), new_cluster(http)
    admin = catalog_server.catalog()
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    for cluster in (a, b):
        admin.create_table(f"{cluster}.events", schema=data.schema).append(data)
    return TwoClusters(
        a, b, new_key(http, a, "reader"), new_key(http, a, "writer"), new_key(http, a, "admin"),
        new_key(http, b, "writer"),
    )  # fmt: skip


def test_cluster_keys_see_only_their_cluster(
    catalog_server: CatalogProcess, two_clusters: TwoClusters
) -> None:
    t = two_clusters
    reader = catalog_server.catalog(credential=t.a_reader.credential)
    assert reader.list_namespaces() == [(t.a,)]
    assert reader.list_tables(t.a) == [(t.a, "events")]
    assert reader.load_table(f"{t.a}.events").scan().to_arrow().num_rows == 3
    with pytest.raises(NoSuchTableError):  # pyiceberg maps every 404 of loadTable to this
        reader.load_table(f"{t.b}.events")
    with pytest.raises(NoSuchNamespaceError):
        reader.list_tables(t.b)
    assert not reader.table_exists(f"{t.b}.events")
    assert not reader.namespace_exists(t.b)

    other = catalog_server.catalog(credential=t.b_writer.credential)
    assert other.list_namespaces() == [(t.b,)]
    with pytest.raises(NoSuchTableError):
        other.load_table(f"{t.a}.events")


def test_readers_cannot_change_anything(
    catalog_server: CatalogProcess, two_clusters: TwoClusters, http: httpx.Client
) -> None:
    t = two_clusters
    reader = catalog_server.catalog(credential=t.a_reader.credential)
    table = reader.load_table(f"{t.a}.events")
    before = http.get(f"/v1/default/namespaces/{t.a}/tables/events").json()["metadata-location"]
    data = pa.table({"id": pa.array([4], pa.int64())})
    with pytest.raises(ForbiddenError):
        table.append(data)
    with pytest.raises(ForbiddenError):
        reader.create_table(f"{t.a}.more", schema=data.schema)
    with pytest.raises(ForbiddenError):
        reader.drop_table(f"{t.a}.events")
    with pytest.raises(ForbiddenError):
        reader.rename_table(f"{t.a}.events", f"{t.a}.renamed")
    with pytest.raises(ForbiddenError):
        reader.create_namespace(f"{t.a}_sibling")
    token = token_for(catalog_server, t.a_reader)
    forbidden = httpx.post(
        f"{catalog_server.url}/v1/default/namespaces/{t.a}/properties",
        json={"updates": {"x": "y"}},
        headers=bearer(token),
    )
    assert_iceberg_error(forbidden, 403, "ForbiddenException")
    after = http.get(f"/v1/default/namespaces/{t.a}/tables/events").json()["metadata-location"]
    assert after == before
    assert catalog_server.catalog().load_table(f"{t.a}.events").scan().to_arrow().num_rows == 3


def test_writers_commit_only_in_their_cluster(
    catalog_server: CatalogProcess, two_clusters: TwoClusters
) -> None:
    t = two_clusters
    writer = catalog_server.catalog(credential=t.a_writer.credential)
    data = pa.table({"id": pa.array([4], pa.int64())})
    writer.load_table(f"{t.a}.events").append(data)
    writer.create_table(f"{t.a}.created_by_writer", schema=data.schema).append(data)
    with pytest.raises(ForbiddenError):
        writer.drop_table(f"{t.a}.events")
    with pytest.raises(NoSuchNamespaceError):
        writer.create_table(f"{t.b}.intruder", schema=data.schema)
    # A commit aimed at another cluster's table answers as if it did not exist.
    token = token_for(catalog_server, t.a_writer)
    commit = httpx.post(
        f"{catalog_server.url}/v1/default/namespaces/{t.b}/tables/events",
        json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"owner": "a"}}]},
        headers=bearer(token),
    )
    assert_iceberg_error(commit, 404, "NoSuchNamespaceException")
    admin = catalog_server.catalog()
    assert admin.load_table(f"{t.a}.events").scan().to_arrow().num_rows == 4
    assert "owner" not in admin.load_table(f"{t.b}.events").properties
    with pytest.raises(NoSuchTableError):
        admin.load_table(f"{t.b}.intruder")


def test_metrics_reports_stay_inside_the_cluster(
    catalog_server: CatalogProcess, two_clusters: TwoClusters
) -> None:
    """Reports for tables without a row (staged creates) are accepted, but only in the caller's own
    namespaces: another cluster's namespace, whether its table exists or not, is a 404 as if absent."""
    t = two_clusters
    token = token_for(catalog_server, t.a_reader)
    report = {
        "report-type": "scan-report",
        "table-name": "x",
        "snapshot-id": 1,
        "filter": True,
        "schema-id": 0,
        "projected-field-ids": [],
        "projected-field-names": [],
        "metrics": {},
    }

    def post(namespace: str, table: str) -> httpx.Response:
        return httpx.post(
            f"{catalog_server.url}/v1/default/namespaces/{namespace}/tables/{table}/metrics",
            json=report,
            headers=bearer(token),
        )

    assert post(t.a, "events").status_code == 204
    assert post(t.a, "staged_only").status_code == 204
    for table in ("events", "staged_only"):
        assert_iceberg_error(post(t.b, table), 404, "NoSuchNamespaceException")


def test_cluster_admins_manage_their_own_keys(
    catalog_server: CatalogProcess, two_clusters: TwoClusters
) -> None:
    t = two_clusters
    with httpx.Client(
        base_url=catalog_server.url, headers=bearer(token_for(catalog_server, t.a_admin))
    ) as a_admin:
        created = a_admin.post("/management/v1/keys", json={"cluster": t.a, "role": "reader"})
        assert created.status_code == 201, created.text
        SECRETS_SEEN.add(created.json()["client_secret"])
        listed = a_admin.get("/management/v1/keys").json()["keys"]
        assert {k["cluster"] for k in listed} == {t.a}
        assert all("client_secret" not in k for k in listed)
        assert_iceberg_error(
            a_admin.post("/management/v1/keys", json={"cluster": t.b, "role": "admin"}),
            403,
            "ForbiddenException",
        )
        assert_iceberg_error(
            a_admin.post("/management/v1/keys", json={"cluster": None, "role": "admin"}),
            403,
            "ForbiddenException",
        )
        assert_iceberg_error(
            a_admin.delete(f"/management/v1/keys/{t.b_writer.client_id}"), 404, "NotFoundException"
        )
        assert_iceberg_error(
            a_admin.post("/management/v1/clusters", json={"name": "x"}), 403, "ForbiddenException"
        )
        catalog_server.catalog(credential=t.a_admin.credential).drop_table(f"{t.a}.events")
    with httpx.Client(
        base_url=catalog_server.url, headers=bearer(token_for(catalog_server, t.a_writer))
    ) as writer:
        assert_iceberg_error(writer.get("/management/v1/keys"), 403, "ForbiddenException")


def test_pyiceberg_oauth2_auth_manager(catalog_server: CatalogProcess, two_clusters: TwoClusters) -> None:
    key = two_clusters.a_reader
    catalog = RestCatalog(
        "floe-oauth2",
        uri=catalog_server.url,
        auth={  # type: ignore[arg-type]  # pyiceberg's signature says str; it takes the mapping
            "type": "oauth2",
            "oauth2": {
                "client_id": key.client_id,
                "client_secret": key.client_secret,
                "token_url": f"{catalog_server.url}{TOKEN_PATH}",
                "scope": "catalog",
            },
        },
    )
    assert catalog.list_namespaces() == [(two_clusters.a,)]
    assert catalog.load_table(f"{two_clusters.a}.events").scan().to_arrow().num_rows == 3


# -- key lifecycle ------------------------------------------------------------------------------------


def test_revoked_keys_stop_working_at_once(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    cluster = new_cluster(http)
    key = new_key(http, cluster, "writer")
    token = token_for(catalog_server, key)
    assert httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(token)).status_code == 200
    assert http.delete(f"/management/v1/keys/{key.client_id}").status_code == 204
    deadline = time.monotonic() + 5
    while httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(token)).status_code != 401:
        assert time.monotonic() < deadline, "a revoked key's token kept working"
        time.sleep(0.2)
    refused = httpx.post(
        f"{catalog_server.url}{TOKEN_PATH}",
        data={
            "grant_type": "client_credentials",
            "client_id": key.client_id,
            "client_secret": key.client_secret,
        },
    )
    assert refused.status_code == 401
    listed = {k["client_id"]: k for k in http.get("/management/v1/keys").json()["keys"]}
    assert listed[key.client_id]["revoked_at"]
    assert listed[key.client_id]["last_used_at"]


def test_rotated_secret_replaces_the_old_one(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    cluster = new_cluster(http)
    key = new_key(http, cluster, "reader")
    rotated = http.post(f"/management/v1/keys/{key.client_id}/rotate")
    assert rotated.status_code == 200, rotated.text
    new_secret = rotated.json()["client_secret"]
    SECRETS_SEEN.add(new_secret)
    assert new_secret != key.client_secret
    old = httpx.post(
        f"{catalog_server.url}{TOKEN_PATH}",
        data={
            "grant_type": "client_credentials",
            "client_id": key.client_id,
            "client_secret": key.client_secret,
        },
    )
    assert old.status_code == 401
    assert token_for(catalog_server, Key(key.client_id, new_secret))


def test_signing_key_rotation_keeps_issued_tokens_valid(
    catalog_server: CatalogProcess, http: httpx.Client
) -> None:
    before = catalog_server.token()
    rotated = http.post("/management/v1/signing-keys/rotate")
    assert rotated.status_code == 200, rotated.text
    after = catalog_server.token()

    def kid(token: str) -> str:
        return str(json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["kid"])

    assert kid(after) == rotated.json()["kid"] != kid(before)
    for token in (before, after):
        assert httpx.get(f"{catalog_server.url}/v1/config", headers=bearer(token)).status_code == 200


def test_failed_attempts_are_rate_limited(fresh_database_url: str) -> None:
    env = {"FLOE_AUTH_FAILURE_LIMIT": "3", "FLOE_AUTH_FAILURE_WINDOW_SECONDS": "30"}
    with CatalogThread(fresh_database_url, env=env) as server:
        wrong = {
            "grant_type": "client_credentials",
            "client_id": server.admin_client_id,
            "client_secret": "nope",
        }
        for _ in range(3):
            assert httpx.post(f"{server.url}{TOKEN_PATH}", data=wrong).status_code == 401
        right = {**wrong, "client_secret": server.admin_client_secret}
        limited = httpx.post(f"{server.url}{TOKEN_PATH}", data=right)
        assert limited.status_code == 429
        assert limited.json()["error"] == "invalid_client"
        assert int(limited.headers["retry-after"]) == 30


def test_bootstrap_admin_written_once(fresh_database_url: str) -> None:
    fresh = fresh_database_url
    env = {"FLOE_ADMIN_CLIENT_ID": "", "FLOE_ADMIN_CLIENT_SECRET": ""}
    server = CatalogThread(fresh, env=env)
    with server:
        path = server.home / "admin.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        credentials = json.loads(path.read_text())
        key = Key(credentials["client_id"], credentials["client_secret"])
        SECRETS_SEEN.add(key.client_secret)
        token = token_for(server, key)
        keys = httpx.get(f"{server.url}/management/v1/keys", headers=bearer(token)).json()["keys"]
        assert [(k["client_id"], k["role"], k["cluster"]) for k in keys] == [(key.client_id, "admin", None)]
    with CatalogThread(fresh, home=server.home, env=env) as again:
        assert json.loads((again.home / "admin.json").read_text()) == credentials
        token = token_for(again, key)
        keys = httpx.get(f"{again.url}/management/v1/keys", headers=bearer(token)).json()["keys"]
        assert len(keys) == 1


# -- audit, CLI, logs ---------------------------------------------------------------------------------


def test_mutations_are_audited(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    cluster = new_cluster(http)
    key = new_key(http, cluster, "reader")
    reader = catalog_server.catalog(credential=key.credential)
    with pytest.raises(ForbiddenError):
        reader.create_table(f"{cluster}.denied", schema=pa.schema([pa.field("id", pa.int64())]))
    catalog_server.catalog().create_table(
        f"{cluster}.allowed", schema=pa.schema([pa.field("id", pa.int64())])
    )
    entries = http.get("/management/v1/audit", params={"cluster": cluster}).json()["entries"]
    actions = [(e["subject"], e["action"], e["outcome"], e["status_code"]) for e in entries]
    assert (key.client_id, "createTable", "denied", 403) in actions
    everything = http.get("/management/v1/audit", params={"limit": 1000}).json()["entries"]
    created = [
        e for e in everything if e["action"] == "createTable" and f"namespace={cluster}" in e["target"]
    ]
    assert any(e["subject"] == catalog_server.admin_client_id and e["outcome"] == "ok" for e in created)
    assert any(
        e["action"] == "createCluster" and e["target"].startswith(f"cluster={cluster} ") for e in everything
    )
    assert any(e["action"] == "getToken" for e in everything)
    # A token request names the client that asked (it has no principal yet).
    assert any(e["action"] == "getToken" and e["subject"] == key.client_id for e in everything)
    # Every entry of this test's requests carries its request id. Only this test's: the log is the
    # server's, and other modules sharing it may have recorded entries without a request (e.g. a
    # warehouse created from the command line, which has none).
    mine = [
        e for e in everything if e["subject"] == key.client_id or f"={cluster}" in e["target"] or e in created
    ]
    assert len(mine) >= 4
    assert all(e["request_id"] for e in mine)


def test_repeated_token_requests_are_one_counted_entry(fresh_database_url: str) -> None:
    env = {"FLOE_AUDIT_REPEAT_WINDOW_SECONDS": "1"}
    with CatalogThread(fresh_database_url, env=env) as server:
        form = {
            "grant_type": "client_credentials",
            "client_id": server.admin_client_id,
            "client_secret": server.admin_client_secret,
        }
        granted = [httpx.post(f"{server.url}{TOKEN_PATH}", data=form) for _ in range(3)]
        assert [r.status_code for r in granted] == [200, 200, 200]
        wrong = httpx.post(f"{server.url}{TOKEN_PATH}", data={**form, "client_secret": "nope"})
        assert wrong.status_code == 401
        audit = f"{server.url}/management/v1/audit"
        headers = bearer(granted[0].json()["access_token"])

        def token_entries() -> list[tuple[str, int, str]]:
            entries = httpx.get(audit, headers=headers).raise_for_status().json()["entries"]
            return [(e["outcome"], e["count"], e["request_id"]) for e in entries if e["action"] == "getToken"]

        # The first grant and the refusal are written before their answers; the repeats are counted.
        first = granted[0].headers["x-request-id"]
        assert token_entries() == [("denied", 1, wrong.headers["x-request-id"]), ("ok", 1, first)]
        deadline = time.monotonic() + 10
        while len(token_entries()) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ("ok", 2, granted[1].headers["x-request-id"]) in token_entries()


def test_no_secret_or_token_in_the_server_log(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    """Runs after the tests above (same module, same server): nothing they used was logged."""
    cluster = new_cluster(http)
    key = new_key(http, cluster, "reader")
    token_for(catalog_server, key)
    httpx.post(
        f"{catalog_server.url}{TOKEN_PATH}",
        data={
            "grant_type": "client_credentials",
            "client_id": key.client_id,
            "client_secret": key.client_secret + "x",
        },
    )
    SECRETS_SEEN.update({catalog_server.admin_client_secret, str(http.headers["authorization"]).split()[-1]})
    log = catalog_server.log_text()
    assert log, "the server log is empty: nothing was checked"
    leaked = [s[:6] + "…" for s in SECRETS_SEEN if s in log]
    assert not leaked, f"secrets or tokens in the server log: {leaked}"
