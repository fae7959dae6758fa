"""floe's image from the real Dockerfile and the stack of compose.yml, run end to end under podman.

No image registry is reachable here: the base image is a Debian root file system (debootstrap) and the
third-party images compose.yml names are replaced by local stand-ins (tests/e2e/containers/) through an
override file that changes only their `image:`. Everything else is compose.yml as users run it.
devtools/containers.py installs, configures and caches what this needs (~/.cache/floe/containers).

Records are produced to topic `events` from the host (localhost:9094) and table `compose.events` is read
from the host with compose/README.md's DuckDB and pyiceberg blocks, run as written (values filled in).
Select with `pytest -m containers`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from devtools import containers
from tests.e2e.duckdb_client import connect

pytestmark = [pytest.mark.containers, pytest.mark.timeout(5400)]

ROOT = Path(__file__).resolve().parents[2]
# compose/env.example with its passwords set (letters and digits, as it asks).
ENV = {
    "POSTGRES_PASSWORD": "postgres0secret",
    "MINIO_ROOT_USER": "floe",
    "MINIO_ROOT_PASSWORD": "minio0secret",
    "FLOE_ADMIN_CLIENT_ID": "floe-admin",
    "FLOE_ADMIN_CLIENT_SECRET": "floe0admin0secret",
}
VOLUMES = {"floe_postgres-data", "floe_kafka-data", "floe_minio-data", "floe_floe-jars"}
README = (ROOT / "compose" / "README.md").read_text()


def fill(block: str) -> str:
    return block.replace("<MINIO_ROOT_PASSWORD>", ENV["MINIO_ROOT_PASSWORD"]).replace(
        "<FLOE_ADMIN_CLIENT_SECRET>", ENV["FLOE_ADMIN_CLIENT_SECRET"]
    )


def produce(first: int, count: int) -> None:
    """JSON records `user_id` first..first+count-1 to topic `events`, from the host."""
    producer = Producer({"bootstrap.servers": "localhost:9094", "enable.idempotence": True})
    for user_id in range(first, first + count):
        record = {"user_id": user_id, "action": "click", "amount": user_id / 2}
        producer.produce("events", json.dumps(record).encode(), key=str(user_id).encode())
    assert producer.flush(60) == 0


def pyiceberg_rows() -> list[dict[str, Any]]:
    """compose/README.md's pyiceberg block as written: the table as Arrow, as rows."""
    [block] = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    printed: list[Any] = []
    exec(fill(block), {"print": printed.append})
    [table] = printed
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def duckdb_count(extensions: Path) -> int:
    """compose/README.md's DuckDB block as written; the extensions come from the installed wheels."""
    [block] = [b for b in re.findall(r"```sql\n(.*?)```", README, re.DOTALL) if "TYPE ICEBERG" in b]
    statements = [s.strip() for s in fill(block).split(";") if s.strip()]
    connection = connect(extensions)
    *setup, query = [s for s in statements if not s.startswith(("INSTALL", "LOAD"))]
    for statement in setup:
        connection.execute(statement)
    [(count,)] = connection.execute(query).fetchall()
    return int(count)


def wait_for(what: str, check: Callable[[], bool], timeout: float, stack: containers.Stack) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout:.0f} s\ningest:\n{stack.logs('ingest')}")
        time.sleep(3)


def user_ids() -> list[int]:
    return sorted(row["user_id"] for row in pyiceberg_rows())


def test_floe_image_and_compose_stack_end_to_end(tmp_path: Path) -> None:
    images = containers.prepare()
    override = containers.override_file(tmp_path / "compose.override.yml")
    stack = containers.Stack(images.podman, [ROOT / "compose.yml", override], ENV)

    # The override changes only `image:` of the services whose images this machine cannot pull.
    original = yaml.safe_load((ROOT / "compose.yml").read_text())["services"]
    replaced = yaml.safe_load(override.read_text())["services"]
    assert {name: set(service) for name, service in replaced.items()} == {
        name: {"image"} for name in replaced
    }
    assert set(replaced) == {name for name, service in original.items() if "build" not in service}

    stack.down(volumes=True)  # what an interrupted earlier run left
    timings: dict[str, float] = dict(images.timings)
    try:
        started = time.monotonic()
        order = stack.up()
        assert order.index("catalog") > order.index("postgres")
        assert order.index("ingest") > order.index("apply")
        stack.wait_healthy("catalog")
        timings["up until the catalog is healthy"] = round(time.monotonic() - started, 1)
        stack.wait_healthy("ingest", timeout=600)
        timings["up until ingest is healthy"] = round(time.monotonic() - started, 1)

        produce(0, 30)
        wait_for("30 rows", lambda: user_ids() == list(range(30)), 300, stack)
        timings["first 30 records readable"] = round(time.monotonic() - started, 1)
        assert duckdb_count(tmp_path / "duckdb") == 30
        # compose/README.md's lag and throughput command, in the ingest container.
        status = stack.exec("ingest", "floe", "status", "--metrics-url", "http://127.0.0.1:9464/metrics")
        assert "events" in status, status

        # The catalog restarted: its tables, snapshots and ingestion's progress are in PostgreSQL.
        stack.restart("catalog")
        stack.wait_healthy("catalog")
        assert user_ids() == list(range(30))
        produce(30, 10)
        wait_for("40 rows after the catalog's restart", lambda: user_ids() == list(range(40)), 300, stack)

        # `down` removes the containers and keeps the named volumes; `up` resumes where it stopped.
        stack.down()
        assert set(stack.volumes()) >= VOLUMES
        started = time.monotonic()
        stack.up()
        stack.wait_healthy("catalog")
        assert user_ids() == list(range(40))
        stack.wait_healthy("ingest", timeout=600)
        timings["second up until ingest is healthy"] = round(time.monotonic() - started, 1)
        produce(40, 10)
        wait_for("50 rows after down and up", lambda: len(user_ids()) >= 50, 300, stack)
        time.sleep(10)  # a duplicate would land with the next micro-batch
        assert user_ids() == list(range(50)), "each record exactly once"
        assert duckdb_count(tmp_path / "duckdb") == 50
    finally:
        sizes = {image: images.podman.image_size(image) // 10**6 for image in containers.built_images()}
        print(json.dumps({"seconds": timings, "image MB": sizes, "retried": stack.retried}, indent=1))
        stack.down(volumes=True)
