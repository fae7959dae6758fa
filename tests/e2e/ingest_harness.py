"""Running the real ingestion service in tests: `floe ingest` as a subprocess, producing, waiting."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from confluent_kafka import KafkaError, Message, Producer

from devtools.catalog_server import CatalogProcess
from devtools.ports import free_port
from devtools.processes import stop_process


class IngestProcess:
    """`floe ingest` against a catalog server, in a subprocess with its own state folder and log."""

    def __init__(
        self,
        server: CatalogProcess,
        home: Path,
        *,
        credential: tuple[str, str] | None = None,
        args: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        metrics_port: int | None = None,
    ) -> None:
        self.server = server
        self.home = home
        self.credential = credential or (server.admin_client_id, server.admin_client_secret)
        self.args = list(args)
        self.env = dict(env or {})  # on top of this process's environment
        # Given when the catalog was told the metrics URL before this process exists (the console's lag).
        self.metrics_port = metrics_port or free_port()
        self.state_dir = home / "state"
        self.log_path = home / "ingest.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def start(self) -> IngestProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "FLOE_URL": self.server.url,
            "FLOE_CLIENT_ID": self.credential[0],
            "FLOE_CLIENT_SECRET": self.credential[1],
            "FLOE_SPARK_MASTER": "local[2]",
            **self.env,
        }
        command = [
            sys.executable,
            "-m",
            "floe.cli",
            "ingest",
            "--metrics-port",
            str(self.metrics_port),
            "--state-dir",
            str(self.state_dir),
            "--poll-interval",
            "1",
            "--driver-memory",
            "1g",
            *self.args,
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no flush, like a crashed machine."""
        # The whole process group: the Python driver and Spark's JVM die at once, as in a host crash.
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        stop_process(self.process)
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):  # anything of the group left (Spark's JVM)
                os.killpg(self.process.pid, signal.SIGKILL)

    def __enter__(self) -> IngestProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@dataclass
class Produced:
    """What a test produced: value and key per (partition, offset), as the broker acknowledged them."""

    records: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = field(default_factory=dict)

    def end_offsets(self) -> dict[int, int]:
        ends: dict[int, int] = {}
        for partition, offset in list(self.records):  # a copy: a producing thread may be adding
            ends[partition] = max(ends.get(partition, 0), offset + 1)
        return ends


def produce(
    bootstrap: str,
    topic: str,
    values: Iterable[bytes | None],
    *,
    keys: Callable[[int], bytes | None] = lambda i: str(i).encode(),
    headers: Callable[[int], list[tuple[str, str | bytes | None]]] | None = None,
    into: Produced | None = None,
) -> Produced:
    """Produce and wait for every acknowledgement; the result maps (partition, offset) to the record."""
    produced = into if into is not None else Produced()
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
            return
        partition, offset = message.partition(), message.offset()
        assert partition is not None
        assert offset is not None
        produced.records[(partition, offset)] = (message.key(), message.value())

    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    key=keys(i),
                    headers=headers(i) if headers else None,
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(60)
    assert not errors, errors
    return produced


def committed_offsets(http: httpx.Client, namespace: str, table: str, topic: str) -> dict[int, int]:
    response = http.get(
        "/management/v1/kafka-offsets",
        params={"warehouse": "default", "namespace": namespace, "table": table},
    )
    response.raise_for_status()
    for entry in response.json()["topics"]:
        if entry["topic"] == topic:
            return {p["partition"]: p["next-offset"] for p in entry["partitions"]}
    return {}


def wait_until_committed(
    http: httpx.Client,
    namespace: str,
    table: str,
    topic: str,
    ends: dict[int, int],
    *,
    timeout: float = 240,
    ingest: IngestProcess | None = None,
) -> None:
    """Until the table's committed offsets reach `ends` in every partition."""
    deadline = time.monotonic() + timeout
    committed: dict[int, int] = {}
    while time.monotonic() < deadline:
        committed = committed_offsets(http, namespace, table, topic)
        if all(committed.get(p, 0) >= end for p, end in ends.items()):
            return
        if ingest is not None and ingest.process is not None and ingest.process.poll() is not None:
            raise AssertionError(f"floe ingest exited: {ingest.log_text()[-4000:]}")
        time.sleep(0.5)
    log = ingest.log_text()[-6000:] if ingest else ""
    raise AssertionError(f"{namespace}.{table} committed {committed}, expected {ends}\n{log}")


@contextlib.contextmanager
def admin_client(server: CatalogProcess) -> Iterator[httpx.Client]:
    """An HTTP client of `server` carrying its bootstrap admin's token."""
    headers = {"Authorization": f"Bearer {server.token()}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
        yield client


def apply_pipeline(http: httpx.Client, config: dict[str, Any]) -> dict[str, Any]:
    response = http.put("/management/v1/pipeline", json={"config": config, "dry_run": False})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


class Pipeline:
    """A test module's floe.yaml: tests add their tables and apply the whole document again.

    `clusters` are source clusters on the one broker at `bootstrap_servers`; `add` puts a table on
    `default_cluster` unless told otherwise, with `defaults` under the table's own keys, and a table
    added again for the same topic replaces the earlier one."""

    def __init__(
        self,
        bootstrap_servers: str,
        admin: httpx.Client,
        clusters: Iterable[str],
        default_cluster: str,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        host, port = bootstrap_servers.split(":")
        brokers = [{"hostname": host, "port": int(port)}]
        self.admin = admin
        self.default_cluster = default_cluster
        self.defaults = dict(defaults or {})
        self.config: dict[str, Any] = {
            "source_clusters": [{"name": name, "bootstrap_brokers": brokers} for name in clusters],
            "tables": [],
        }

    def add(self, cluster: str | None = None, **table: Any) -> dict[str, Any]:
        self.config["tables"] = [
            t for t in self.config["tables"] if t["source_topic"] != table["source_topic"]
        ]
        self.config["tables"].append(
            {"source_cluster_name": cluster or self.default_cluster, **self.defaults, **table}
        )
        return apply_pipeline(self.admin, self.config)
