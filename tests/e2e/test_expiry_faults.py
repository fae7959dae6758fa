"""Snapshot expiry's cleanup window cut by faults (`maintenance.inprocess.expire_snapshots`), on PostgreSQL
with real `floe serve` processes.

Expiry commits `remove-snapshots` and then deletes what only the removed snapshots reached: data files
first, then manifests, then manifest lists. Cut in that window:
- the maintainer killed (kill -9) right after its commit landed, before it deleted anything;
- the maintainer killed after it deleted the first file;
- the catalog killed right after committing the expiry, before answering (`FLOE_TEST_FAULT=
  crash-after-commit`): the maintainer gets no answer and must delete nothing.

Afterwards the expiry has landed, every file a remaining snapshot reads exists, the table reads every
row, and what the cut cleanup left behind is exactly the unreferenced rest: the orphan removal's own
functions (`maintenance.orphans`) find those files, and removing them leaves the table whole.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table import Table

from catalog.faults import CRASH_AFTER_COMMIT, FAULT_ENV
from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres
from maintenance import inprocess, orphans
from maintenance.planner import ExpireRun

pytestmark = pytest.mark.e2e

START_TIMEOUT = 300
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])
KEPT = 2

# The maintainer, in a process of its own: expiry with its deletes cut at `FLOE_CUT` (`before-delete`:
# at the first delete; `after-first-delete`: once the first file is gone). It writes the marker and
# waits there for its kill -9.
MAINTAINER = """
import json, os, time
from pathlib import Path
from pyiceberg.catalog.rest import RestCatalog
from maintenance import inprocess
from maintenance.planner import ExpireRun

cut, marker = os.environ["FLOE_CUT"], Path(os.environ["FLOE_MARKER"])
delete_files = inprocess.orphans.delete_files

def cut_delete(io, locations):
    locations = list(locations)
    if cut == "after-first-delete" and locations:
        delete_files(io, locations[:1])
        marker.write_text(locations[0])
    else:
        marker.write_text("")
    time.sleep(600)

inprocess.orphans.delete_files = cut_delete
catalog = RestCatalog("floe", uri=os.environ["FLOE_URL"], credential=os.environ["FLOE_CREDENTIAL"])
table = catalog.load_table(os.environ["FLOE_TABLE"])
run = ExpireRun(0, 0, 0, tuple(json.loads(os.environ["FLOE_EXPIRE"])))
inprocess.expire_snapshots(table, run)
"""


@pytest.fixture(scope="module")
def database(postgres: LocalPostgres) -> str:
    return postgres.create_database(f"floe_expiry_{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("expiry-floe")


@pytest.fixture(scope="module")
def secret() -> str:
    return uuid.uuid4().hex


def server_of(database: str, home: Path, secret: str, **env: str) -> CatalogProcess:
    """A server of the module's database and warehouse, with the same admin key every time."""
    env = {"FLOE_ADMIN_CLIENT_ID": "floe-admin", "FLOE_ADMIN_CLIENT_SECRET": secret, **env}
    return CatalogProcess(database, home=home, env=env)


@pytest.fixture(scope="module")
def server(database: str, home: Path, secret: str) -> Iterator[CatalogProcess]:
    process = server_of(database, home, secret).start(timeout=START_TIMEOUT)
    try:
        yield process
    finally:
        process.stop()


def history(server: CatalogProcess) -> tuple[str, list[int], list[int]]:
    """A table of 5 appends, an overwrite of all their rows (their 5 files deleted) and 2 appends;
    returns its name, the snapshots to expire (all but the last `KEPT`) and every row's id."""
    catalog = server.catalog()
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    table = catalog.create_table(f"{namespace}.t", SCHEMA)
    ids: list[int] = []
    for batch in range(5):
        rows = list(range(batch * 10, batch * 10 + 10))
        table.append(pa.table({"id": rows}, schema=SCHEMA))
        ids += rows
    table.overwrite(pa.table({"id": ids}, schema=SCHEMA))
    for batch in range(5, 7):
        rows = list(range(batch * 10, batch * 10 + 10))
        table.append(pa.table({"id": rows}, schema=SCHEMA))
        ids += rows
    ancestry = [s.snapshot_id for s in table.snapshots()]
    assert len(ancestry) >= 8
    return f"{namespace}.t", ancestry[:-KEPT], ids


def on_disk(table: Table) -> set[str]:
    return {orphans.file_key(f.location) for f in orphans.list_files(table.io, table.metadata.location)}


def check_whole(table: Table, expired: list[int], ids: list[int]) -> set[str]:
    """The expiry landed, every referenced file exists, every row reads; returns the unreferenced
    files left on disk."""
    kept = [s.snapshot_id for s in table.metadata.snapshots]
    assert not set(kept) & set(expired), "the expiry did not land"
    assert len(kept) == KEPT
    # What readers open: the lists and manifests of every snapshot, and the data files live in one.
    read = orphans.referenced_files(table, live_only=True)
    present = on_disk(table)
    assert read <= present, f"a file a snapshot reads is gone: {sorted(read - present)[:3]}"
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == sorted(ids)
    return present - orphans.referenced_files(table)


def remove_leftovers(table: Table, left: set[str], expired: list[int], ids: list[int]) -> None:
    """What the orphan removal would delete is `left`; deleting it leaves the table whole, and the
    expiry run again finds nothing to do."""
    location = table.metadata.location
    names = orphans.partition_names(table.metadata)
    horizon = int(time.time() * 1000) + 1000  # any age
    candidates = orphans.orphan_candidates(orphans.list_files(table.io, location), location, horizon, names)
    found = {
        orphans.file_key(f.location) for f in orphans.orphans(candidates, orphans.referenced_files(table))
    }
    assert found == left
    orphans.delete_files(table.io, sorted(left))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == sorted(ids)
    again = inprocess.expire_snapshots(table, ExpireRun(0, 0, 0, tuple(expired)))
    assert again["expired_snapshots_count"] == 0


@pytest.mark.parametrize("cut", ["before-delete", "after-first-delete"])
def test_maintainer_killed_in_the_cleanup_window(server: CatalogProcess, tmp_path: Path, cut: str) -> None:
    name, expired, ids = history(server)
    catalog = server.catalog()
    before = on_disk(catalog.load_table(name))
    marker = tmp_path / "cut"
    env = {
        **os.environ,
        "FLOE_URL": server.url,
        "FLOE_CREDENTIAL": server.admin_credential,  # in the environment: never on a command line
        "FLOE_TABLE": name,
        "FLOE_EXPIRE": json.dumps(expired),
        "FLOE_CUT": cut,
        "FLOE_MARKER": str(marker),
    }
    child = subprocess.Popen([sys.executable, "-c", MAINTAINER], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert child.poll() is None, (child.stderr.read() if child.stderr else b"").decode()[-3000:]
            assert time.monotonic() < deadline, "the maintainer never reached its deletes"
            time.sleep(0.1)
        time.sleep(0.2)  # the marker's text is written
        deleted_first = marker.read_text()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        if child.stderr:
            child.stderr.close()

    table = catalog.load_table(name)
    left = check_whole(table, expired, ids)
    # Nothing but the removed snapshots' files was deleted, and of those only what the cut allowed.
    gone = before - on_disk(table)
    if cut == "before-delete":
        assert gone == set()
    else:
        assert gone == {orphans.file_key(deleted_first)}
        assert deleted_first.endswith(".parquet"), "data files go first"
    # The 5 files of the first appends, their manifests and lists at least.
    assert sum(1 for f in left if f.endswith(".parquet")) == 5 - len(gone)
    assert sum(1 for f in left if f.endswith(".avro")) >= len(expired)
    remove_leftovers(table, left, expired, ids)


def test_catalog_killed_before_answering_the_expiry(
    server: CatalogProcess, database: str, home: Path, secret: str
) -> None:
    name, expired, ids = history(server)
    before = on_disk(server.catalog().load_table(name))
    doomed = server_of(database, home, secret, **{FAULT_ENV: CRASH_AFTER_COMMIT}).start(timeout=START_TIMEOUT)
    try:
        table = doomed.catalog().load_table(name)
        with pytest.raises(Exception):  # noqa: B017, PT011 - no answer: whatever the client raises
            inprocess.expire_snapshots(table, ExpireRun(0, 0, 0, tuple(expired)))
        assert doomed.process is not None
        assert doomed.process.wait(30) == -signal.SIGKILL
    finally:
        doomed.stop()
    table = server.catalog().load_table(name)
    left = check_whole(table, expired, ids)
    assert before <= on_disk(table), "a file was deleted on a commit that was never answered"
    assert sum(1 for f in left if f.endswith(".parquet")) == 5
    remove_leftovers(table, left, expired, ids)
