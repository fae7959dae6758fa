"""Seeding identical data into a REST catalog and the benchmark's workloads against it.

Everything here speaks plain Iceberg REST, so every catalog gets exactly the same requests; the
per-server differences are the route prefix announced by `GET /v1/config`, the warehouse a client
names (Lakekeeper serves several) and, for Lakekeeper, a `pageSize` on listTables (it pages by 100
unless asked for more; 1,000 is its maximum).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

import httpx
import pyarrow as pa
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import (
    BooleanType,
    DecimalType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from benchmarks.catalog.loadgen import LoadResult, RequestFactory, build_request, run_load

# A clickstream-like table: nested, list and map columns, a decimal, partitioned by day.
EVENTS_SCHEMA = Schema(
    NestedField(1, "event_id", LongType(), required=True),
    NestedField(2, "event_time", TimestamptzType(), required=True),
    NestedField(3, "user_id", StringType(), required=True),
    NestedField(4, "session_id", StringType(), required=False),
    NestedField(5, "event_type", StringType(), required=True),
    NestedField(6, "country", StringType(), required=False),
    NestedField(
        7,
        "device",
        StructType(
            NestedField(8, "os", StringType(), required=False),
            NestedField(9, "os_version", StringType(), required=False),
            NestedField(10, "model", StringType(), required=False),
        ),
        required=False,
    ),
    NestedField(11, "amount", DecimalType(12, 2), required=False),
    NestedField(12, "quantity", IntegerType(), required=False),
    NestedField(13, "tags", ListType(14, StringType(), element_required=False), required=False),
    NestedField(
        15,
        "attributes",
        MapType(16, StringType(), 17, StringType(), value_required=False),
        required=False,
    ),
    NestedField(18, "is_test", BooleanType(), required=False),
    identifier_field_ids=[1],
)
EVENTS_PARTITIONING = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="event_day")
)
EVENTS_PROPERTIES = {"write.parquet.compression-codec": "zstd", "owner": "benchmarks"}

# The small table created 1,000 times in the listing namespace (as a CreateTableRequest schema).
LIST_TABLE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "value", "type": "string", "required": False},
    ],
}


def _without_null_storage_credentials(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    """Lakekeeper 0.7 answers `"storage-credentials": null`, which pyiceberg 0.12 refuses (the spec
    makes it an optional array): the seeding client reads such an answer without that key."""
    if b'"storage-credentials":null' in response.content:
        body = response.json()
        body.pop("storage-credentials", None)
        response._content = json.dumps(body).encode()


@dataclass(frozen=True)
class Target:
    """One catalog under test: its base URL, the route prefix its `/v1/config` announced, and the
    credentials every request carries (floe: a bearer token; the reference server and Lakekeeper as
    started here have no auth)."""

    name: str
    url: str
    base_path: str  # e.g. "/v1/default" (floe), "/v1" (no prefix), "/catalog/v1/<warehouse id>" (Lakekeeper)
    token: str | None = None
    # More processes serving the same catalog (same database): the load is spread over all of them.
    more_ports: tuple[int, ...] = ()
    # The warehouse clients ask `/v1/config` for (Lakekeeper); None: the server's only one.
    warehouse: str | None = None
    # Sent as `pageSize` on listTables (Lakekeeper pages by 100 without it); None: not sent.
    list_page_size: int | None = None
    # More pyiceberg client properties for seeding (Lakekeeper: the S3 credentials to write data files).
    client_properties: tuple[tuple[str, str], ...] = ()

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def catalog(self) -> RestCatalog:
        """A pyiceberg client of this catalog."""
        properties = {"token": self.token} if self.token else {}
        if self.warehouse:
            properties["warehouse"] = self.warehouse
        catalog = RestCatalog(self.name, uri=self.url, **properties, **dict(self.client_properties))
        catalog._session.hooks["response"].append(_without_null_storage_credentials)
        return catalog

    def http(self) -> httpx.Client:
        """An HTTP client with this catalog's credentials, asking for uncompressed answers."""
        return httpx.Client(
            base_url=self.origin, timeout=30, headers={**self.headers, "Accept-Encoding": "identity"}
        )

    @property
    def origin(self) -> str:
        """Scheme, host and port: request paths (`base_path` onwards) are absolute."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80

    @property
    def ports(self) -> list[int]:
        """Every port the load generator spreads its connections over."""
        return [self.port, *self.more_ports]

    @property
    def host_header(self) -> str:
        return f"{self.host}:{self.port}"

    def table_path(self, namespace: str, table: str) -> str:
        return f"{self.base_path}/namespaces/{quote(namespace, safe='')}/tables/{quote(table, safe='')}"

    def tables_path(self, namespace: str) -> str:
        return f"{self.base_path}/namespaces/{quote(namespace, safe='')}/tables"

    def list_tables_path(self, namespace: str) -> str:
        """The listTables request: one page holding every table (up to the page size)."""
        page = f"?pageSize={self.list_page_size}" if self.list_page_size else ""
        return self.tables_path(namespace) + page


def discover(
    name: str,
    url: str,
    token: str | None = None,
    *,
    warehouse: str | None = None,
    list_page_size: int | None = None,
) -> Target:
    """Ask the catalog for its route prefix, as every client does first."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    params = {"warehouse": warehouse} if warehouse else {}
    config = (
        httpx.get(f"{url}/v1/config", timeout=30, headers=headers, params=params).raise_for_status().json()
    )
    prefix = (config.get("overrides") or {}).get("prefix") or (config.get("defaults") or {}).get("prefix")
    # The catalog may live under a path (Lakekeeper: /catalog); request paths start with it.
    root = urlsplit(url).path.rstrip("/")
    base_path = f"{root}/v1/{quote(prefix, safe='')}" if prefix else f"{root}/v1"
    return Target(name, url, base_path, token, warehouse=warehouse, list_page_size=list_page_size)


@dataclass(frozen=True)
class Dataset:
    """Names of what `seed` creates; a suffix keeps repeated seeds on one server apart."""

    suffix: str = ""
    list_tables: int = 1000
    appends: int = 8
    rows_per_append: int = 200

    @property
    def namespace(self) -> str:
        return f"bench{self.suffix}"

    @property
    def list_namespace(self) -> str:
        return f"bench_list{self.suffix}"

    read_table: ClassVar[str] = "events"
    commit_table: ClassVar[str] = "events_commits"


@dataclass(frozen=True)
class SeedInfo:
    """What the read table looks like once seeded (reported alongside the numbers)."""

    snapshots: int
    metadata_json_bytes: int
    load_table_response_bytes: int
    list_tables_response_bytes: int
    seconds: float


def _event_batch(arrow_schema: pa.Schema, rows: int, batch: int, rng: random.Random) -> pa.Table:
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=batch)
    records = [
        {
            "event_id": batch * rows + i,
            "event_time": start + dt.timedelta(seconds=rng.randrange(86400)),
            "user_id": f"user-{rng.randrange(10_000):05d}",
            "session_id": f"s-{rng.getrandbits(48):012x}",
            "event_type": rng.choice(["view", "click", "add_to_cart", "purchase"]),
            "country": rng.choice(["DE", "FR", "US", "JP", "BR", None]),
            "device": {"os": rng.choice(["ios", "android", "web"]), "os_version": "17.1", "model": None},
            "amount": Decimal(rng.randrange(100, 100_000)) / 100,
            "quantity": rng.randrange(1, 5),
            "tags": ["promo"] if rng.random() < 0.2 else [],
            "attributes": {"campaign": f"c{rng.randrange(20)}"},
            "is_test": False,
        }
        for i in range(rows)
    ]
    return pa.Table.from_pylist(records, schema=arrow_schema)


def _create_events_table(catalog: RestCatalog, namespace: str, name: str, dataset: Dataset) -> None:
    table = catalog.create_table(
        (namespace, name),
        schema=EVENTS_SCHEMA,
        partition_spec=EVENTS_PARTITIONING,
        properties=EVENTS_PROPERTIES,
    )
    arrow_schema = table.schema().as_arrow()
    rng = random.Random(42)  # the same rows on every server
    for batch in range(dataset.appends):
        table.append(_event_batch(arrow_schema, dataset.rows_per_append, batch, rng))


async def _create_list_tables(target: Target, namespace: str, count: int, parallel: int = 4) -> None:
    names = iter(f"t_{i:04d}" for i in range(count))
    async with httpx.AsyncClient(base_url=target.origin, timeout=60, headers=target.headers) as client:

        async def creator() -> None:
            for name in names:
                body = {"name": name, "schema": LIST_TABLE_SCHEMA}
                for attempt in range(5):
                    response = await client.post(target.tables_path(namespace), json=body)
                    if response.status_code == 200:
                        break
                    # A busy embedded database may refuse a write now and then: retry it.
                    if response.status_code < 500 or attempt == 4:
                        response.raise_for_status()
                    await asyncio.sleep(0.1 * (attempt + 1))

        await asyncio.gather(*(creator() for _ in range(parallel)))


def seed(target: Target, dataset: Dataset) -> SeedInfo:
    """Create the namespaces, the two events tables (with `appends` snapshots each, written through
    pyiceberg) and the listing namespace's tables."""
    started = time.perf_counter()
    catalog = target.catalog()
    catalog.create_namespace(dataset.namespace)
    catalog.create_namespace(dataset.list_namespace)
    _create_events_table(catalog, dataset.namespace, dataset.read_table, dataset)
    _create_events_table(catalog, dataset.namespace, dataset.commit_table, dataset)
    asyncio.run(_create_list_tables(target, dataset.list_namespace, dataset.list_tables))
    with target.http() as http:
        loaded = http.get(target.table_path(dataset.namespace, dataset.read_table)).raise_for_status()
        listed = http.get(target.list_tables_path(dataset.list_namespace)).raise_for_status()
    body = loaded.json()
    listed_count = len(listed.json()["identifiers"])
    if listed_count != dataset.list_tables:
        raise RuntimeError(f"{target.name}: listTables returned {listed_count} of {dataset.list_tables}")
    return SeedInfo(
        snapshots=len(body["metadata"].get("snapshots", [])),
        metadata_json_bytes=len(json.dumps(body["metadata"], separators=(",", ":"))),
        load_table_response_bytes=len(loaded.content),
        list_tables_response_bytes=len(listed.content),
        seconds=time.perf_counter() - started,
    )


def create_cluster_key(url: str, admin_token: str, cluster: str, role: str = "writer") -> dict[str, Any]:
    """Make Kafka cluster `cluster` in floe (at `url`, as the admin) and a key of it with `role`; the
    management API's answer (`client_id`, the `client_secret` floe generated, ...)."""
    headers = {"Authorization": f"Bearer {admin_token}"}
    with httpx.Client(base_url=url, timeout=60, headers=headers) as http:
        http.post("/management/v1/clusters", json={"name": cluster}).raise_for_status()
        created = http.post("/management/v1/keys", json={"cluster": cluster, "role": role})
        key: dict[str, Any] = created.raise_for_status().json()
    return key


def seed_read_table(target: Target, dataset: Dataset) -> None:
    """Only the table loadTable reads (and its namespace, unless it exists): a cluster's key may create
    tables in its cluster's namespace only, which floe made with the cluster."""
    catalog = target.catalog()
    if not catalog.namespace_exists(dataset.namespace):
        catalog.create_namespace(dataset.namespace)
    _create_events_table(catalog, dataset.namespace, dataset.read_table, dataset)


# -- workloads -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One measured scenario: how many concurrent clients and what each of them sends."""

    key: str
    title: str
    concurrency: int
    # Builds the request factory for a target (may do a priming request, e.g. to learn the ETag).
    prepare: Callable[[Target, Dataset], tuple[RequestFactory, dict[str, Any]]]


def _load_table(target: Target, dataset: Dataset) -> tuple[RequestFactory, dict[str, Any]]:
    request = build_request(
        "GET", target.table_path(dataset.namespace, dataset.read_table), target.host_header, target.headers
    )
    return (lambda _: request), {}


def _load_table_etag(target: Target, dataset: Dataset) -> tuple[RequestFactory, dict[str, Any]]:
    path = target.table_path(dataset.namespace, dataset.read_table)
    with target.http() as http:
        first = http.get(path).raise_for_status()
        etag = first.headers.get("etag")
        probe = http.get(path, headers={"If-None-Match": etag}) if etag else None
    notes: dict[str, Any] = {
        "etag": etag,
        "etag_supported": etag is not None,
        "conditional_status": probe.status_code if probe is not None else None,
    }
    # Without an ETag there is nothing to revalidate: send a made-up one, as a client with a stale
    # cache would, and report what the server answers.
    headers = {**target.headers, "If-None-Match": etag or '"no-etag"'}
    request = build_request("GET", path, target.host_header, headers)
    return (lambda _: request), notes


def _commit(target: Target, dataset: Dataset) -> tuple[RequestFactory, dict[str, Any]]:
    path = target.table_path(dataset.namespace, dataset.commit_table)
    host = target.host_header

    def request(sequence: int) -> bytes:
        # A new value every time, so every commit really changes the table.
        body = {
            "requirements": [],
            "updates": [{"action": "set-properties", "updates": {"bench.commit": str(sequence)}}],
        }
        return build_request("POST", path, host, target.headers, json.dumps(body).encode())

    return request, {}


def _list_tables(target: Target, dataset: Dataset) -> tuple[RequestFactory, dict[str, Any]]:
    request = build_request(
        "GET", target.list_tables_path(dataset.list_namespace), target.host_header, target.headers
    )
    return (lambda _: request), {"tables_in_namespace": dataset.list_tables}


def workloads(clients: int = 32) -> list[Workload]:
    return [
        Workload("load_table", "loadTable (full response)", clients, _load_table),
        Workload("load_table_etag", "loadTable with If-None-Match", clients, _load_table_etag),
        Workload("commit_1", "commit set-properties, 1 writer", 1, _commit),
        Workload("commit_8", "commit set-properties, 8 writers", 8, _commit),
        Workload("list_tables", "listTables (1,000 tables)", clients, _list_tables),
    ]


def measure(
    target: Target, dataset: Dataset, workload: Workload, duration_s: float, warmup_s: float
) -> tuple[LoadResult, dict[str, Any]]:
    """Run one workload against one target."""
    factory, notes = workload.prepare(target, dataset)
    result = run_load(target.host, target.ports, factory, workload.concurrency, duration_s, warmup_s)
    return result, notes
