"""A tenant sees its own cluster only (issue 29, items 4, 5, 6 and 7): the attacks, through the API and
the console of an in-process server.

- No principal outside the caller's cluster is shown to a cluster key: the global administrator's (and
  other clusters') client ids are "operator" in key listings, the applied pipeline, maintenance passes,
  and never appear on the keys, pipeline, audit or table pages (item 4).
- A table cannot be placed at its cluster's folder or its namespace's folder, and no credentials are
  vended for one stored there (item 5; the session policy's prefixes are in tests/unit/test_vending.py).
- Kafka offsets beyond int64, nested JSON, offsets without a topic are a 400, and a table whose stored
  summaries hold such things still has a working page (item 6).
- The pipeline a cluster key reads holds its cluster's part only, and no URL shows `user:password@`
  to anyone, even in a revision stored before floe refused them (item 7).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.exceptions import BadRequestError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from catalog.kafka_offsets import END_OFFSETS, MAX_TIMESTAMP, MIN_TIMESTAMP, START_OFFSETS, TOPIC
from catalog.store import create_store
from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread
from tests.api.test_console import Browser, Key, text_of
from tests.api.test_maintenance import pass_body

PIPELINE = "/management/v1/pipeline"
SECRET_URL_PASSWORD = "hunter2-registry-password"


@dataclass
class Tenants:
    server: CatalogProcess
    admin_id: str
    a: str
    b: str
    keys: dict[str, Key]  # a_admin, a_writer, a_reader, b_admin, b_writer

    def http(self, who: str) -> httpx.Client:
        key = self.keys[who]
        token = self.server.token(key.client_id, key.secret)
        return httpx.Client(
            base_url=self.server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def browser(self, who: str) -> Browser:
        browser = Browser(self.server.url)
        signed = browser.sign_in(self.keys[who])
        assert signed.status_code == 303, signed.text
        return browser

    def foreign_ids(self, cluster: str) -> set[str]:
        """Client ids a key of `cluster` must never see."""
        own = {self.keys[n].client_id for n in self.keys if n.startswith(cluster + "_")}
        return {self.admin_id, *(k.client_id for k in self.keys.values())} - own


def _key(http: httpx.Client, role: str, cluster: str | None) -> Key:
    response = http.post("/management/v1/keys", json={"role": role, "cluster": cluster})
    assert response.status_code == 201, response.text
    return Key(response.json()["client_id"], response.json()["client_secret"])


def _pipeline(a: str, b: str, registry: str = "http://registry.internal:8081") -> dict[str, Any]:
    brokers = [{"hostname": "localhost", "port": 9092}]
    return {
        "source_clusters": [
            {"name": a, "bootstrap_brokers": brokers},
            {"name": b, "bootstrap_brokers": brokers},
        ],
        "schema_registry": {"url": registry},
        "glue": {"region": "eu-west-1", "catalog_id": "123456789012"},
        "tables": [
            {
                "source_cluster_name": a,
                "source_topic": "clicks",
                "source_format": "json",
                "schema": {"fields": [{"name": "id", "id": 1, "type": "long"}]},
            },
            {
                "source_cluster_name": b,
                "source_topic": "payments",
                "source_format": "avro",
                "schema_mode": "registry",
                "schema": {"fields": [{"name": "id", "id": 1, "type": "long"}]},
            },
        ],
    }


@pytest.fixture(scope="module")
def tenants(new_database: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    home = Path(tmp_path_factory.mktemp("tenants"))
    with CatalogThread(new_database(), home=home) as server:
        headers = {"Authorization": f"Bearer {server.token()}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            a, b = f"ta_{uuid.uuid4().hex[:6]}", f"tb_{uuid.uuid4().hex[:6]}"
            applied = http.put(PIPELINE, json={"config": _pipeline(a, b)})
            assert applied.status_code == 200, applied.text
            keys = {
                "a_admin": _key(http, "admin", a),
                "a_writer": _key(http, "writer", a),
                "a_reader": _key(http, "reader", a),
                "b_admin": _key(http, "admin", b),
                "b_writer": _key(http, "writer", b),
            }
            # The operator's maintenance worker records a pass of a's table with the global admin key.
            recorded = http.post("/management/v1/maintenance/passes", json=pass_body([a], "clicks"))
            assert recorded.status_code == 201, recorded.text
            # The global admin does things in a's namespace (audited under its own id).
            assert http.get(f"/v1/default/namespaces/{a}/tables").status_code == 200
        yield Tenants(server, server.admin_client_id, a, b, keys)


def _assert_none_of(text: str, ids: set[str]) -> None:
    leaked = sorted(i for i in ids if i in text)
    assert not leaked, f"foreign principals shown: {leaked}"


# -- item 4: principals outside the caller's cluster ------------------------------------------------


def test_key_listings_redact_the_operator_and_other_clusters(tenants: Tenants) -> None:
    t = tenants
    with t.http("a_admin") as a_admin:
        listed = a_admin.get("/management/v1/keys")
        assert listed.status_code == 200, listed.text
        keys = listed.json()["keys"]
        assert {k["created_by"] for k in keys if k["client_id"] != t.keys["a_admin"].client_id} <= {
            "operator"
        }
        _assert_none_of(listed.text, t.foreign_ids("a"))
        # A key the cluster admin creates names it; rotating a key the operator created does not.
        created = a_admin.post("/management/v1/keys", json={"cluster": t.a, "role": "reader"})
        assert created.json()["created_by"] == t.keys["a_admin"].client_id
        mine = a_admin.get("/management/v1/keys").json()["keys"]
        assert {k["created_by"] for k in mine if k["client_id"] == created.json()["client_id"]} == {
            t.keys["a_admin"].client_id
        }
        rotated = a_admin.post(f"/management/v1/keys/{t.keys['a_reader'].client_id}/rotate")
        assert rotated.status_code == 200, rotated.text
        assert rotated.json()["created_by"] == "operator"
        t.keys["a_reader"] = Key(t.keys["a_reader"].client_id, rotated.json()["client_secret"])
    with httpx.Client(
        base_url=t.server.url, headers={"Authorization": f"Bearer {t.server.token()}"}, timeout=30
    ) as admin:
        assert {k["created_by"] for k in admin.get("/management/v1/keys").json()["keys"]} >= {t.admin_id}


def test_pipeline_applied_by_is_the_operator_for_cluster_keys(tenants: Tenants) -> None:
    with tenants.http("a_writer") as writer:
        state = writer.get(PIPELINE)
        assert state.status_code == 200, state.text
        assert state.json()["applied_by"] == "operator"
        _assert_none_of(state.text, tenants.foreign_ids("a"))


def test_maintenance_passes_redact_the_operators_worker(tenants: Tenants) -> None:
    t = tenants
    with t.http("a_reader") as reader:
        listed = reader.get("/management/v1/maintenance/passes")
        assert listed.status_code == 200, listed.text
        passes = listed.json()["passes"]
        assert passes
        assert {p["recorded_by"] for p in passes} == {"operator"}
        _assert_none_of(listed.text, t.foreign_ids("a"))
    with t.http("a_writer") as writer:  # a pass the cluster's own worker records names it
        own = writer.post("/management/v1/maintenance/passes", json=pass_body([t.a], "clicks"))
        assert own.status_code == 201, own.text
    with t.http("a_reader") as reader:
        recorded_by = {
            p["recorded_by"] for p in reader.get("/management/v1/maintenance/passes").json()["passes"]
        }
        assert recorded_by == {"operator", t.keys["a_writer"].client_id}


def test_audit_entries_show_no_foreign_principal(tenants: Tenants) -> None:
    t = tenants
    with t.http("a_admin") as a_admin:
        assert a_admin.delete("/management/v1/keys/floe_0000000000000000").status_code == 404
        assert a_admin.post("/management/v1/keys", json={"cluster": t.a, "role": "reader"}).status_code == 201
        audit = a_admin.get("/management/v1/audit", params={"limit": 1000})
        assert audit.status_code == 200, audit.text
        assert {e["action"] for e in audit.json()["entries"]} >= {"createKey", "revokeKey"}
        _assert_none_of(audit.text, t.foreign_ids("a"))


def test_console_pages_show_no_foreign_principal(tenants: Tenants) -> None:
    t = tenants
    pages = {
        "a_admin": ["/console", "/console/keys", "/console/audit", "/console/pipeline"],
        "a_writer": ["/console/pipeline", f"/console/tables/default/{t.a}/clicks"],
        "a_reader": [f"/console/tables/default/{t.a}/clicks"],
    }
    for who, paths in pages.items():
        browser = t.browser(who)
        try:
            for path in paths:
                response = browser.get(path)
                assert response.status_code == 200, (who, path, response.text[-2000:])
                _assert_none_of(response.text, t.foreign_ids("a"))
        finally:
            browser.close()


# -- item 7: the pipeline's other clusters and URL credentials -----------------------------------------


def test_a_cluster_key_reads_only_its_part_of_the_pipeline(tenants: Tenants) -> None:
    t = tenants
    with t.http("a_writer") as writer:
        state = writer.get(PIPELINE).json()
    assert [c["name"] for c in state["config"]["source_clusters"]] == [t.a]
    assert [x["cluster"] for x in state["tables"]] == [t.a]
    # The registry only b's table reads, and the operator's Glue account, are not a's to see.
    assert "schema_registry" not in state["config"]
    assert "glue" not in state["config"]
    assert t.b not in json.dumps(state)
    assert "registry.internal" not in json.dumps(state)
    with t.http("b_writer") as writer:
        state = writer.get(PIPELINE).json()
    assert state["config"]["schema_registry"] == {"url": "http://registry.internal:8081"}
    assert t.a not in json.dumps(state)
    assert "glue" not in state["config"]
    browser = t.browser("a_writer")
    try:
        page = browser.get("/console/pipeline").text
        assert t.b not in page
        assert "registry.internal" not in page
        assert "123456789012" not in page
    finally:
        browser.close()


@pytest.mark.parametrize(
    ("where", "path"),
    [
        (("schema_registry", "url"), "schema_registry.url"),
        (("tables", 1, "schema_registry_url"), "tables[1].schema_registry_url"),
        (("glue", "endpoint"), "glue.endpoint"),
        (
            ("source_clusters", 0, "bootstrap_brokers", 0, "hostname"),
            "source_clusters[0].bootstrap_brokers[0].hostname",
        ),
        (("destination_bucket_url",), "destination_bucket_url"),
    ],
)
def test_urls_with_credentials_are_refused_with_their_yaml_path(
    tenants: Tenants, where: tuple[Any, ...], path: str
) -> None:
    config = _pipeline(f"x_{uuid.uuid4().hex[:6]}", f"y_{uuid.uuid4().hex[:6]}")
    values = {
        "destination_bucket_url": f"s3://bucket?region=eu-west-1&endpoint=http://me:{SECRET_URL_PASSWORD}@minio:9000",
        "hostname": f"me:{SECRET_URL_PASSWORD}@kafka",
    }
    value = values.get(str(where[-1]), f"http://me:{SECRET_URL_PASSWORD}@registry.internal:8081")
    node: Any = config
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    with httpx.Client(
        base_url=tenants.server.url, headers={"Authorization": f"Bearer {tenants.server.token()}"}, timeout=30
    ) as admin:
        response = admin.put(PIPELINE, json={"config": config, "dry_run": True})
    assert response.status_code == 400, response.text
    errors = {e["path"]: e["message"] for e in response.json()["error"]["errors"]}
    assert path in errors, errors
    assert "credentials" in errors[path]
    assert SECRET_URL_PASSWORD not in response.text


def test_a_stored_revision_with_url_credentials_shows_them_to_no_one(tenants: Tenants) -> None:
    """A revision an older floe stored (URLs with `user:password@`): its credentials are shown to no one,
    the global administrator included, on the API and the console."""
    t = tenants

    async def store_legacy() -> None:
        assert t.server.database_url is not None
        store = create_store(t.server.database_url, pool_size=1)
        try:
            latest = await store.latest_pipeline_revision()
            assert latest is not None
            config = json.loads(json.dumps(latest.config))
            config["schema_registry"]["url"] = f"http://me:{SECRET_URL_PASSWORD}@registry.internal:8081"
            config["glue"]["endpoint"] = f"https://me:{SECRET_URL_PASSWORD}@glue.internal"
            await store.add_pipeline_revision(
                after=latest.revision,
                warehouse=latest.warehouse,
                config=config,
                plan=[],
                applied_by=t.admin_id,
            )
        finally:
            await store.close()

    asyncio.run(store_legacy())
    with httpx.Client(
        base_url=t.server.url, headers={"Authorization": f"Bearer {t.server.token()}"}, timeout=30
    ) as admin:
        state = admin.get(PIPELINE)
        assert state.status_code == 200, state.text
        assert SECRET_URL_PASSWORD not in state.text
        assert state.json()["config"]["schema_registry"]["url"] == "http://registry.internal:8081"
    with t.http("b_writer") as writer:
        state = writer.get(PIPELINE)
        assert state.status_code == 200, state.text
        assert SECRET_URL_PASSWORD not in state.text
        assert state.json()["tables"][0]["schema_registry_url"] == "http://registry.internal:8081"
    for who in ("b_admin", "a_admin"):
        browser = t.browser(who)
        try:
            page = browser.get("/console/pipeline")
            assert page.status_code == 200, page.text[-2000:]
            assert SECRET_URL_PASSWORD not in page.text
        finally:
            browser.close()
    browser = Browser(t.server.url)
    browser.sign_in(Key(t.admin_id, t.server.admin_client_secret))
    try:
        page = browser.get("/console/pipeline")
        assert page.status_code == 200
        assert SECRET_URL_PASSWORD not in page.text
    finally:
        browser.close()


def test_a_stored_revision_that_no_longer_validates_breaks_no_page(tenants: Tenants) -> None:
    """A revision an older floe accepted that floe now refuses: its errors (which quote every cluster's
    part) reach no cluster key, and no console page breaks."""
    t = tenants

    async def store(config_of: Any) -> None:
        assert t.server.database_url is not None
        store = create_store(t.server.database_url, pool_size=1)
        try:
            latest = await store.latest_pipeline_revision()
            assert latest is not None
            await store.add_pipeline_revision(
                after=latest.revision,
                warehouse=latest.warehouse,
                config=config_of(json.loads(json.dumps(latest.config))),
                plan=[],
                applied_by=t.admin_id,
            )
        finally:
            await store.close()

    def broken(config: dict[str, Any]) -> dict[str, Any]:
        config["source_clusters"][1]["bootstrap_brokers"][0]["hostname"] = f"me:{SECRET_URL_PASSWORD}@kafka"
        return config

    asyncio.run(store(broken))
    try:
        with t.http("a_writer") as writer:
            answer = writer.get(PIPELINE)
            assert answer.status_code == 503, answer.text
            assert t.b not in answer.text
            assert SECRET_URL_PASSWORD not in answer.text
        for who in ("a_writer", "a_admin", "a_reader"):
            browser = t.browser(who)
            try:
                for path in ("/console", "/console/pipeline"):
                    page = browser.get(path)
                    assert page.status_code in (200, 403), (who, path, page.text[-2000:])
                    assert SECRET_URL_PASSWORD not in page.text
            finally:
                browser.close()
    finally:
        asyncio.run(store(lambda config: config | {"source_clusters": _fixed(config["source_clusters"])}))


def _fixed(clusters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for cluster in clusters:
        for broker in cluster["bootstrap_brokers"]:
            broker["hostname"] = "localhost"
    return clusters


# -- item 5: a table at its cluster's or namespace's folder ------------------------------------------


def test_a_table_cannot_be_placed_at_its_cluster_or_namespace_folder(tenants: Tenants) -> None:
    t = tenants
    probe = f"probe_{uuid.uuid4().hex[:6]}"
    with t.http("a_writer") as writer:
        created = writer.post(
            f"/v1/default/namespaces/{t.a}/tables", json={"name": probe, "schema": _SCHEMA_JSON}
        )
        assert created.status_code == 200, created.text
        location = created.json()["metadata"]["location"]
        cluster_folder = location.rsplit("/", 1)[0]
        assert cluster_folder.endswith("/" + t.a), cluster_folder
        for spelling in (cluster_folder, cluster_folder + "/", cluster_folder + "/x/.."):
            refused = writer.post(
                f"/v1/default/namespaces/{t.a}/tables",
                json={"name": f"root_{uuid.uuid4().hex[:6]}", "schema": _SCHEMA_JSON, "location": spelling},
            )
            assert 400 <= refused.status_code < 500, refused.text
            assert refused.json()["error"]["code"] == refused.status_code
        # A nested namespace's own folder is refused as well; a folder below it is fine.
        nested = writer.post("/v1/default/namespaces", json={"namespace": [t.a, "inner"]})
        assert nested.status_code == 200, nested.text
        inner_folder = f"{cluster_folder}/inner"
        refused = writer.post(
            f"/v1/default/namespaces/{t.a}%1Finner/tables",
            json={"name": "at_folder", "schema": _SCHEMA_JSON, "location": inner_folder},
        )
        assert 400 <= refused.status_code < 500, refused.text
        fine = writer.post(
            f"/v1/default/namespaces/{t.a}%1Finner/tables",
            json={"name": "below", "schema": _SCHEMA_JSON, "location": f"{inner_folder}/below"},
        )
        assert fine.status_code == 200, fine.text
        # Moving a table to the cluster folder later is refused too.
        moved = writer.post(
            f"/v1/default/namespaces/{t.a}/tables/{probe}",
            json={"updates": [{"action": "set-location", "location": cluster_folder}], "requirements": []},
        )
        assert 400 <= moved.status_code < 500, moved.text


_SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


# -- item 6: Kafka offsets ---------------------------------------------------------------------------

ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})


@pytest.mark.parametrize(
    "summary",
    [
        {TOPIC: "orders", END_OFFSETS: json.dumps({"0": 2**63})},
        {TOPIC: "orders", END_OFFSETS: '{"0": 99999999999999999999999999999999999}'},
        {TOPIC: "orders", START_OFFSETS: json.dumps({"0": 2**64}), END_OFFSETS: json.dumps({"0": 2**64})},
        {TOPIC: "orders", END_OFFSETS: "[" * 100_000 + "]" * 100_000},
        {TOPIC: "orders", END_OFFSETS: '{"0": ' + "{" * 100_000 + "}" * 100_000 + "}"},
        {TOPIC: "orders", END_OFFSETS: json.dumps({str(2**31): 1})},
        {TOPIC: "orders", END_OFFSETS: json.dumps({"1_0": 1})},
        {TOPIC: "orders", END_OFFSETS: json.dumps({"0": 1}), MAX_TIMESTAMP: str(2**70), MIN_TIMESTAMP: "0"},
        {START_OFFSETS: json.dumps({"x": 1})},
        {END_OFFSETS: json.dumps({"0": 5})},
        {TOPIC: "", END_OFFSETS: json.dumps({"0": 5})},
    ],
)
def test_bad_kafka_offsets_are_a_bad_request_and_change_nothing(
    tenants: Tenants, summary: dict[str, str]
) -> None:
    t = tenants
    catalog = t.server.catalog(credential=f"{t.keys['a_writer'].client_id}:{t.keys['a_writer'].secret}")
    name = f"{t.a}.offsets_{uuid.uuid4().hex[:6]}"
    table = catalog.create_table(name, Schema(NestedField(1, "id", LongType())))
    with pytest.raises(BadRequestError):
        table.append(ROWS, snapshot_properties=summary)
    assert catalog.load_table(name).current_snapshot() is None
    browser = t.browser("a_reader")
    try:
        assert browser.get(f"/console/tables/default/{t.a}/{name.split('.')[1]}").status_code == 200
    finally:
        browser.close()


def test_a_table_with_bad_stored_offsets_still_has_its_page(tenants: Tenants) -> None:
    """Summaries an older floe accepted (registered metadata, written before the checks): the table
    page, the offsets and time-travel answers stay 200/4xx for everyone."""
    t = tenants
    catalog = t.server.catalog()
    name = f"legacy_{uuid.uuid4().hex[:6]}"
    table = catalog.create_table(f"{t.a}.{name}", Schema(NestedField(1, "id", LongType())))
    table.append(ROWS)
    metadata = json.loads(Path(table.metadata_location.removeprefix("file://")).read_text())
    bad_summaries = [
        {START_OFFSETS: json.dumps({"x": 1})},
        {START_OFFSETS: json.dumps({"0": 5}), END_OFFSETS: "not json"},
        {TOPIC: "orders", END_OFFSETS: '{"0": ' + "[" * 50_000 + "]" * 50_000 + "}"},
        {TOPIC: "orders", START_OFFSETS: json.dumps({"zz": 2**80}), END_OFFSETS: json.dumps({"0": 2**70})},
        {TOPIC: "orders", END_OFFSETS: json.dumps({"0": 7}), MIN_TIMESTAMP: "0", MAX_TIMESTAMP: str(10**30)},
    ]
    base = metadata["snapshots"][0]
    snapshots = []
    for index, extra in enumerate(bad_summaries):
        snapshot = json.loads(json.dumps(base))
        snapshot["snapshot-id"] = base["snapshot-id"] + index + 1
        snapshot["parent-snapshot-id"] = base["snapshot-id"] + index if index else base["snapshot-id"]
        snapshot["sequence-number"] = base["sequence-number"] + index + 1
        snapshot["timestamp-ms"] = base["timestamp-ms"] + index + 1
        snapshot["summary"] = {**base["summary"], **extra}
        snapshots.append(snapshot)
    metadata["snapshots"] += snapshots
    metadata["last-sequence-number"] = snapshots[-1]["sequence-number"]
    metadata["current-snapshot-id"] = snapshots[-1]["snapshot-id"]
    metadata["snapshot-log"] += [
        {"snapshot-id": s["snapshot-id"], "timestamp-ms": s["timestamp-ms"]} for s in snapshots
    ]
    metadata["refs"] = {"main": {"snapshot-id": snapshots[-1]["snapshot-id"], "type": "branch"}}
    folder = Path(table.metadata_location.removeprefix("file://")).parent
    legacy = folder / f"99999-{uuid.uuid4()}.metadata.json"
    legacy.write_text(json.dumps(metadata))
    catalog.register_table(f"{t.a}.{name}_old", legacy.as_uri())
    params = {"warehouse": "default", "namespace": t.a, "table": f"{name}_old"}
    for who in ("a_reader", "a_admin"):
        browser = t.browser(who)
        try:
            page = browser.get(f"/console/tables/default/{t.a}/{name}_old")
            assert page.status_code == 200, page.text[-3000:]
            assert "Kafka offsets" in text_of(page.text)
        finally:
            browser.close()
    with t.http("a_reader") as reader:
        for query in ({"partition": 0, "offset": 1}, {"timestamp": 5}):
            answer = reader.get("/management/v1/snapshots/at", params={**params, **query})
            assert 200 <= answer.status_code < 500, answer.text
        assert reader.get("/management/v1/kafka-offsets", params=params).status_code == 200
