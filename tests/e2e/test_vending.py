"""Storage credential vending with real clients and real `floe serve` processes, on both database backends.

moto server on loopback stands in for S3, STS and IAM, with IAM authentication switched on: every S3 and
STS request must be signed by a known identity whose policies allow it. floe's server runs as an IAM user
allowed to assume one role; engines (pyiceberg, DuckDB) get no storage keys of their own, only what floe
vends with `X-Iceberg-Access-Delegation: vended-credentials`.

Stock moto does not apply the session policy passed to AssumeRole (AWS grants a session only what both the
role's policies and the session policy allow). `session_policies_enforced` adds that rule to the moto
server in this process, for object actions and resources; moto evaluates no `StringLike` condition, so
the ListBucket prefix condition is checked on the policy document only.

floe's server is a process of its own here: its AWS identity is environment variables, which boto3 and
pyarrow read per process. What needs no such server (a local warehouse vends nothing, the vendor against
moto's STS) is in tests/api/test_vending.py; the pure pieces in tests/unit/test_vending.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
import pyarrow as pa
import pytest
from moto.server import ThreadedMotoServer
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError

from catalog.security.vending import session_policy
from devtools.catalog_server import CatalogProcess
from devtools.ports import free_port
from tests.e2e.duckdb_client import attach_catalog, connect
from tests.unit.test_vending import WRITE_ACTIONS

REGION = "us-east-1"
DELEGATION = {"X-Iceberg-Access-Delegation": "vended-credentials"}
SECRET_KEYS = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token")
VENDED_KEYS = {
    *SECRET_KEYS,
    "s3.session-token-expires-at-ms",
    "s3.endpoint",
    "s3.region",
    "client.region",
    "s3.path-style-access",
}
# moto names HEAD on a bucket HeadBucket; AWS authorizes it as s3:ListBucket.
MOTO_ACTION_ALIASES = {"s3:HeadBucket": "s3:ListBucket"}


@dataclass(frozen=True)
class Aws:
    endpoint: str
    bucket: str
    role_arn: str
    server_keys: dict[str, str]  # floe's own identity: may assume the role
    tester_keys: dict[str, str]  # this test's identity: may do anything

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION, **self.tester_keys)

    def session_policies(self) -> dict[str, dict[str, Any]]:
        """The session policy STS received, per vended access key id (from the moto server's state:
        it runs in this process)."""
        from moto.sts.models import sts_backends

        sessions = sts_backends["123456789012"]["aws"].assumed_roles
        return {s.access_key_id: json.loads(s.policy) for s in sessions if s.policy}

    def keys_under(self, prefix: str) -> set[str]:
        pages = self.client("s3").get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {o["Key"] for page in pages for o in page.get("Contents", [])}


@contextlib.contextmanager
def session_policies_enforced() -> Iterator[None]:
    """Make moto deny a request of an assumed-role session that its session policy does not allow."""
    from moto.iam.access_control import AssumedRoleAccessKey, IAMPolicy, IAMRequestBase, PermissionResult
    from moto.sts.models import sts_backends

    role_check = IAMRequestBase.check_action_permitted

    def check(self: Any, resource: str) -> None:
        role_check(self, resource)
        key = self._access_key
        if not isinstance(key, AssumedRoleAccessKey):
            return
        sessions = sts_backends[key.account_id][key.partition].assumed_roles
        policy = next((s.policy for s in sessions if s.access_key_id == key._access_key_id), None)
        if not policy:
            return
        action = MOTO_ACTION_ALIASES.get(self._action, self._action)
        if IAMPolicy(policy).is_action_permitted(action, resource) is not PermissionResult.PERMITTED:
            self._raise_access_denied()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IAMRequestBase, "check_action_permitted", check)
        yield


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    yield from moto_aws()


def moto_aws() -> Iterator[Aws]:
    """moto (S3, STS, IAM) with a bucket, floe's IAM user, the role it may assume, and IAM auth on."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    suffix = uuid.uuid4().hex[:8]
    # moto's state is per process: names are unique in case the module's fixtures are set up twice.
    bootstrap = {"aws_access_key_id": "bootstrap", "aws_secret_access_key": "bootstrap"}
    iam = boto3.client("iam", endpoint_url=endpoint, region_name=REGION, **bootstrap)
    bucket = f"lake-{suffix}"
    boto3.client("s3", endpoint_url=endpoint, region_name=REGION, **bootstrap).create_bucket(Bucket=bucket)
    role_name = f"floe-vending-{suffix}"
    role_arn = f"arn:aws:iam::123456789012:role/{role_name}"

    def user(name: str, statements: list[dict[str, Any]]) -> tuple[str, dict[str, str]]:
        arn = iam.create_user(UserName=name)["User"]["Arn"]
        document = {"Version": "2012-10-17", "Statement": statements}
        iam.put_user_policy(UserName=name, PolicyName="floe", PolicyDocument=json.dumps(document))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return arn, {"aws_access_key_id": key["AccessKeyId"], "aws_secret_access_key": key["SecretAccessKey"]}

    server_arn, server_keys = user(
        f"floe-server-{suffix}",
        [
            {
                "Effect": "Allow",
                "Action": "s3:*",
                "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
            },
            {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": role_arn},
        ],
    )
    _, tester_keys = user(f"tester-{suffix}", [{"Effect": "Allow", "Action": "*", "Resource": "*"}])
    trust = {"Effect": "Allow", "Principal": {"AWS": server_arn}, "Action": "sts:AssumeRole"}
    iam.create_role(
        RoleName=role_name,
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [trust]}),
    )
    lake = {
        "Effect": "Allow",
        "Action": "s3:*",
        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
    }
    iam.put_role_policy(
        RoleName=role_name,
        PolicyName="lake",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [lake]}),
    )
    # From here on every request is authenticated and authorized (moto's switch is process-wide).
    httpx.post(f"{endpoint}/moto-api/reset-auth", content=b"0").raise_for_status()
    try:
        with session_policies_enforced():
            yield Aws(endpoint, bucket, role_arn, server_keys, tester_keys)
    finally:
        httpx.post(f"{endpoint}/moto-api/reset-auth", content=b"inf").raise_for_status()
        server.stop()


@dataclass(frozen=True)
class Key:
    client_id: str
    client_secret: str

    @property
    def credential(self) -> str:
        return f"{self.client_id}:{self.client_secret}"


@dataclass(frozen=True)
class Vending:
    server: CatalogProcess
    admin: httpx.Client
    warehouse_location: str
    cluster: str
    reader: Key
    writer: Key

    def client(self, key: Key) -> httpx.Client:
        token = self.server.token(key.client_id, key.client_secret)
        return httpx.Client(
            base_url=self.server.url, timeout=60, headers={"Authorization": f"Bearer {token}"}
        )

    def catalog(self, key: Key) -> RestCatalog:
        """pyiceberg with no storage keys of its own: everything comes from the catalog."""
        return self.server.catalog(
            credential=key.credential, **{"header.X-Iceberg-Access-Delegation": "vended-credentials"}
        )

    def tables(self, namespace: str | None = None) -> str:
        return f"/v1/default/namespaces/{namespace or self.cluster}/tables"


def _server_env(aws: Aws, warehouse_location: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": aws.server_keys["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": aws.server_keys["aws_secret_access_key"],
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "FLOE_WAREHOUSE": warehouse_location,
        "FLOE_S3_ENDPOINT": aws.endpoint,
        "FLOE_S3_REGION": REGION,
        "FLOE_S3_PATH_STYLE_ACCESS": "true",
        "FLOE_STS_ROLE_ARN": aws.role_arn,
        "FLOE_STS_ENDPOINT": aws.endpoint,
    }


@dataclass(frozen=True)
class VendingServer:
    server: CatalogProcess
    admin: httpx.Client
    warehouse_location: str


@pytest.fixture(scope="module")
def vending_server(aws: Aws, new_database: Callable[[], str]) -> Iterator[VendingServer]:
    """floe whose default warehouse is `s3://bucket/<prefix>` and vends, for the module (per backend):
    each test works in a cluster of its own."""
    ambient = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"}
    assert not ambient & set(os.environ), "engines must not find AWS keys of their own"
    location = f"s3://{aws.bucket}/wh-{uuid.uuid4().hex[:8]}"
    with (
        CatalogProcess(new_database(), env=_server_env(aws, location)) as server,
        httpx.Client(
            base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {server.token()}"}
        ) as admin,
    ):
        yield VendingServer(server, admin, location)


@pytest.fixture
def vending(vending_server: VendingServer) -> Vending:
    """The module's vending floe with a new cluster, a reader and a writer."""
    server, admin = vending_server.server, vending_server.admin
    cluster = f"kafka_{uuid.uuid4().hex[:8]}"
    assert admin.post("/management/v1/clusters", json={"name": cluster}).status_code == 201

    def key(role: str) -> Key:
        created = admin.post("/management/v1/keys", json={"cluster": cluster, "role": role})
        assert created.status_code == 201, created.text
        return Key(created.json()["client_id"], created.json()["client_secret"])

    return Vending(server, admin, vending_server.warehouse_location, cluster, key("reader"), key("writer"))


def _create_body(name: str, **extra: Any) -> dict[str, Any]:
    schema = {
        "type": "struct",
        "schema-id": 0,
        "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}],
    }
    return {"name": name, "schema": schema, **extra}


def _assert_vended(answer: dict[str, Any], location: str, endpoint: str) -> dict[str, str]:
    """The answer carries one storage credential for `location`, also merged into `config`."""
    [credential] = answer["storage-credentials"]
    assert credential["prefix"] == location + "/"  # the table's folder only, never a sibling's
    config = credential["config"]
    assert set(config) == VENDED_KEYS
    assert config["s3.access-key-id"].startswith("ASIA"), "a temporary (STS) key"
    assert config["s3.session-token"]
    assert int(config["s3.session-token-expires-at-ms"]) > 0
    assert config["s3.endpoint"] == endpoint
    assert config["s3.region"] == config["client.region"] == REGION
    assert config["s3.path-style-access"] == "true"
    assert {k: answer["config"][k] for k in config} == config
    return dict(config)


def _assert_no_secrets(answer: dict[str, Any]) -> None:
    assert "storage-credentials" not in answer
    assert not set(SECRET_KEYS) & set(answer["config"])


# -- the REST answers -----------------------------------------------------------------------------------


def test_load_create_and_credentials_answers(vending: Vending, aws: Aws) -> None:
    v = vending
    with v.client(v.writer) as writer, v.client(v.reader) as reader:
        created = writer.post(v.tables(), json=_create_body("clicks"), headers=DELEGATION)
        assert created.status_code == 200, created.text
        location = created.json()["metadata"]["location"]
        assert location.startswith(f"{v.warehouse_location}/{v.cluster}/clicks-")
        writer_config = _assert_vended(created.json(), location, aws.endpoint)
        assert created.headers["cache-control"] == "no-store"

        # Without the header: endpoint, region and addressing only.
        plain = writer.get(f"{v.tables()}/clicks")
        assert plain.status_code == 200
        _assert_no_secrets(plain.json())
        assert plain.json()["config"] == {
            "s3.endpoint": aws.endpoint,
            "s3.region": REGION,
            "client.region": REGION,
            "s3.path-style-access": "true",
        }
        assert "cache-control" not in plain.headers
        unvended = writer.post(v.tables(), json=_create_body("quiet"))
        assert unvended.status_code == 200
        _assert_no_secrets(unvended.json())

        # Readers get read-only credentials, writers read-write, each scoped to the table's location.
        loaded = reader.get(f"{v.tables()}/clicks", headers=DELEGATION)
        assert loaded.status_code == 200
        reader_config = _assert_vended(loaded.json(), location, aws.endpoint)
        assert reader_config["s3.access-key-id"] != writer_config["s3.access-key-id"]
        policies = aws.session_policies()
        reader_policy = policies[reader_config["s3.access-key-id"]]
        writer_policy = policies[writer_config["s3.access-key-id"]]
        assert reader_policy == session_policy(location, read_only=True)
        assert writer_policy == session_policy(location, read_only=False)
        table_prefix = location.removeprefix(f"s3://{aws.bucket}/")
        for policy, expected_writes in ((reader_policy, set()), (writer_policy, WRITE_ACTIONS)):
            objects, listing, bucket_location = policy["Statement"]
            assert objects["Resource"] == [f"arn:aws:s3:::{aws.bucket}/{table_prefix}/*"]
            assert set(objects["Action"]) & WRITE_ACTIONS == expected_writes
            assert listing["Action"] == ["s3:ListBucket"]
            folder = f"{table_prefix}/"  # never `table_prefix` alone: it would list siblings' names
            assert listing["Condition"] == {"StringLike": {"s3:prefix": [folder, f"{folder}*"]}}
            assert bucket_location["Action"] == ["s3:GetBucketLocation"]

        # Cached per table and mode until near expiry: one STS call, not one per load.
        again = reader.get(f"{v.tables()}/clicks", headers=DELEGATION).json()
        assert again["storage-credentials"][0]["config"] == reader_config

        # The ETag names the metadata version, not the credentials; a 304 carries none.
        etag = loaded.headers["etag"]
        assert plain.headers["etag"] == etag
        not_modified = reader.get(f"{v.tables()}/clicks", headers={**DELEGATION, "If-None-Match": etag})
        assert not_modified.status_code == 304
        assert not_modified.content == b""

        # GET …/credentials answers the same credential (fresh ones once these near their expiry).
        refreshed = reader.get(f"{v.tables()}/clicks/credentials")
        assert refreshed.status_code == 200, refreshed.text
        expected = [{"prefix": location + "/", "config": reader_config}]
        assert refreshed.json() == {"storage-credentials": expected}

        # Stage-create: there is no metadata location yet, so clients read the credentials from config.
        staged = writer.post(
            v.tables(), json=_create_body("staged", **{"stage-create": True}), headers=DELEGATION
        )
        assert staged.status_code == 200, staged.text
        assert "metadata-location" not in staged.json()
        _assert_vended(staged.json(), staged.json()["metadata"]["location"], aws.endpoint)

    log = v.server.log_text()
    assert "vended read-only credentials for " + location in log
    for config in (reader_config, writer_config):
        for name in ("s3.secret-access-key", "s3.session-token"):
            assert config[name] not in log, f"{name} in the server log"


# -- engines with nothing but vended credentials ----------------------------------------------------------


def test_pyiceberg_writes_and_reads_with_vended_credentials_only(vending: Vending, aws: Aws) -> None:
    v = vending
    writer = v.catalog(v.writer)
    assert not set(SECRET_KEYS) & set(writer.properties), "the catalog client holds no storage keys"
    data = pa.table({"id": pa.array(range(100), pa.int64()), "v": pa.array([f"v{i}" for i in range(100)])})
    table = writer.create_table(f"{v.cluster}.orders", schema=data.schema)
    assert table.io.properties["s3.access-key-id"].startswith("ASIA")
    table.append(data)
    table.append(data.slice(0, 10))
    assert writer.load_table(f"{v.cluster}.orders").scan().to_arrow().num_rows == 110

    reader = v.catalog(v.reader)
    loaded = reader.load_table(f"{v.cluster}.orders")
    assert loaded.io.properties["s3.access-key-id"] != table.io.properties["s3.access-key-id"]
    scanned = loaded.scan().to_arrow()
    assert scanned.num_rows == 110
    assert sorted(scanned["id"].to_pylist()) == sorted([*range(100), *range(10)])
    prefix = loaded.location().removeprefix(f"s3://{aws.bucket}/")
    before = aws.keys_under(prefix)
    # The reader's credentials cannot write: S3 refuses the data file before floe sees a commit.
    with pytest.raises(OSError, match=r"(?i)access ?denied|forbidden|403"):
        loaded.append(data)
    assert aws.keys_under(prefix) == before
    # And a reader with its own way to write files still cannot commit.
    with pytest.raises(ForbiddenError):
        reader.create_table(f"{v.cluster}.mine", schema=data.schema)


# -- what gets no credentials ---------------------------------------------------------------------------


def test_locations_outside_the_callers_scope_get_none(vending: Vending, aws: Aws) -> None:
    v = vending
    outside = f"{v.warehouse_location}/elsewhere/t"
    with v.client(v.writer) as writer:
        # A cluster key cannot place a table outside its cluster folder at all (test_confinement.py)...
        refused = writer.post(v.tables(), json=_create_body("moved", location=outside), headers=DELEGATION)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["type"] == "ForbiddenException"
        assert "storage-credentials" not in refused.json()
        # ...a global administrator can (inside the warehouse), and the cluster's keys get no
        # credentials for it.
        created = v.admin.post(v.tables(), json=_create_body("moved", location=outside))
        assert created.status_code == 200, created.text
        loaded = writer.get(f"{v.tables()}/moved", headers=DELEGATION)
        assert loaded.status_code == 200
        _assert_no_secrets(loaded.json())
        refused = writer.get(f"{v.tables()}/moved/credentials")
        assert refused.status_code == 403
        assert refused.json()["error"]["type"] == "ForbiddenException"
        assert "outside" in refused.json()["error"]["message"]
    # A global admin's scope is the whole warehouse.
    admin_load = v.admin.get(f"{v.tables()}/moved", headers=DELEGATION)
    _assert_vended(admin_load.json(), outside, aws.endpoint)


def test_no_table_at_the_cluster_folder_itself(vending: Vending) -> None:
    """Credentials for a table at `<warehouse>/<cluster>` would reach every table of the cluster (and, as
    a list prefix without `/`, the names of `<cluster>x…`): such a location is refused for everyone."""
    v = vending
    folder = f"{v.warehouse_location}/{v.cluster}"
    with v.client(v.writer) as writer:
        for client in (writer, v.admin):
            for spelling in (folder, folder + "/", f"{folder}/x/.."):
                refused = client.post(
                    v.tables(), json=_create_body("at_root", location=spelling), headers=DELEGATION
                )
                assert refused.status_code == 400, refused.text
                assert "storage-credentials" not in refused.json()
        assert writer.get(f"{v.tables()}/at_root").status_code == 404


def test_sts_failure_is_503_and_creates_nothing(vending: Vending, aws: Aws) -> None:
    v = vending
    assert v.server.database_url is not None
    cli = subprocess.run(
        [
            sys.executable, "-m", "floe.cli", "warehouses", "create", "unassumable",
            "--location", f"{v.warehouse_location}-other", "--s3-endpoint", aws.endpoint,
            "--s3-region", REGION, "--s3-path-style",
            "--sts-role-arn", "arn:aws:iam::123456789012:role/not-allowed",
            "--sts-endpoint", aws.endpoint,
        ],
        env={**os.environ, "FLOE_HOME": str(v.server.home), "FLOE_DATABASE_URL": v.server.database_url},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    properties = json.loads(cli.stdout)["properties"]
    assert properties["sts.role-arn"] == "arn:aws:iam::123456789012:role/not-allowed"
    assert properties["sts.endpoint"] == aws.endpoint

    assert v.admin.post("/v1/unassumable/namespaces", json={"namespace": ["ns"]}).status_code == 200
    tables = "/v1/unassumable/namespaces/ns/tables"
    failed = v.admin.post(tables, json=_create_body("t"), headers=DELEGATION)
    assert failed.status_code == 503, failed.text
    assert failed.json()["error"]["type"] == "ServiceUnavailableException"
    assert "AssumeRole" in failed.json()["error"]["message"]
    assert v.admin.get(f"{tables}/t").status_code == 404
    # Without the header the warehouse works as any other.
    assert v.admin.post(tables, json=_create_body("t")).status_code == 200
    assert v.admin.get(f"{tables}/t", headers=DELEGATION).status_code == 503
    assert v.admin.get(f"{tables}/t").status_code == 200


@pytest.mark.e2e
def test_duckdb_reads_and_writes_with_vended_credentials_only(
    vending: Vending, aws: Aws, tmp_path_factory: pytest.TempPathFactory
) -> None:
    v = vending
    data = pa.table({"id": pa.array(range(50), pa.int64())})
    created = v.catalog(v.writer).create_table(f"{v.cluster}.events", schema=data.schema)
    created.append(data)
    prefix = created.location().removeprefix(f"s3://{aws.bucket}/")

    connection = connect(tmp_path_factory.mktemp("duckdb-ext"))
    # No S3 secret exists: the only storage credentials DuckDB can use are the ones floe vends
    # (DuckDB asks for them by default: ACCESS_DELEGATION_MODE 'vended_credentials').
    assert connection.execute("SELECT count(*) FROM duckdb_secrets() WHERE type = 's3'").fetchone() == (0,)
    attach_catalog(
        connection,
        endpoint=v.server.url,
        warehouse="default",
        client_id=v.reader.client_id,
        client_secret=v.reader.client_secret,
        alias="as_reader",
    )
    table = f'as_reader."{v.cluster}".events'
    assert connection.execute(f"SELECT count(*), sum(id) FROM {table}").fetchone() == (50, sum(range(50)))
    before = aws.keys_under(prefix)
    # S3 refuses the reader's data file (floe would refuse the commit as well).
    with pytest.raises(Exception, match=r"(?i)403|forbidden|access denied"):
        connection.execute(f"INSERT INTO {table} VALUES (1000)")
    assert aws.keys_under(prefix) == before

    attach_catalog(
        connection,
        endpoint=v.server.url,
        warehouse="default",
        client_id=v.writer.client_id,
        client_secret=v.writer.client_secret,
        alias="as_writer",
    )
    connection.execute(f'INSERT INTO as_writer."{v.cluster}".events VALUES (1000), (1001)')
    assert connection.execute(f'SELECT count(*), max(id) FROM as_writer."{v.cluster}".events').fetchone() == (
        52,
        1001,
    )
    assert v.catalog(v.reader).load_table(f"{v.cluster}.events").scan().to_arrow().num_rows == 52
