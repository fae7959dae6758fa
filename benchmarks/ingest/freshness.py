"""A DuckDB reader of floe's REST catalog that notes when each record first becomes visible.

DuckDB loads its `iceberg`, `httpfs` and `avro` extensions from the installed PyPI wheels
(`duckdb_extension_*`, pinned to DuckDB's version) with automatic downloads switched off, and attaches
floe as an Iceberg REST catalog with an API key (OAuth2 client credentials). Every poll is a new
query, so DuckDB loads the table's current metadata from floe each time, as any reader would.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

EXTENSIONS = ("httpfs", "avro", "iceberg")


def _extension_file(name: str) -> Path:
    package = importlib.import_module(f"duckdb_extension_{name}")
    package_dir = Path(str(package.__file__)).parent
    files = sorted(package_dir.rglob(f"{name}.duckdb_extension"))
    matching = [path for path in files if f"v{duckdb.__version__}" in path.parts]
    if not (matching or files):
        raise FileNotFoundError(f"No {name}.duckdb_extension under {package_dir}")
    return (matching or files)[0]


def connect_to_floe(
    extension_directory: Path, *, endpoint: str, client_id: str, client_secret: str, threads: int = 1
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with floe attached as database `floe` (warehouse `default`)."""
    connection = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "extension_directory": str(extension_directory),
            "python_enable_replacements": False,
            # One thread: the reader shares the two cores with the ingester it measures.
            "threads": threads,
        }
    )
    for name in EXTENSIONS:
        connection.execute(f"INSTALL '{_extension_file(name)}'")
        connection.execute(f"LOAD {name}")
    connection.execute(
        f"CREATE OR REPLACE SECRET floe_secret (TYPE ICEBERG, CLIENT_ID '{client_id}', "
        f"CLIENT_SECRET '{client_secret}', OAUTH2_SERVER_URI '{endpoint}/v1/oauth/tokens')"
    )
    connection.execute(f"ATTACH 'default' AS floe (TYPE ICEBERG, ENDPOINT '{endpoint}', SECRET floe_secret)")
    return connection


@dataclass
class Visibility:
    """When each record (`seq`) was first seen, and what its producer stamped into it (`sent_at`)."""

    seen_at: dict[int, float] = field(default_factory=dict)
    sent_at: dict[int, float] = field(default_factory=dict)
    poll_seconds: list[float] = field(default_factory=list)
    poll_errors: int = 0
    last_error: str = ""
    first_visible_at: float | None = None

    def freshness(self, seqs: list[int]) -> list[float]:
        return [self.seen_at[s] - self.sent_at[s] for s in seqs if s in self.seen_at]


class VisibilityProbe:
    """Polls one table for records not seen yet (`seq` above the highest contiguous seen one)."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, table: str) -> None:
        self.connection = connection
        self.table = table
        self.visibility = Visibility()
        self._contiguous = -1  # every seq up to this one has been seen

    def poll(self) -> int:
        """One query; returns how many records became visible. A record's visibility time is when the
        query that first returned it finished (what a reader polling this often would observe)."""
        started = time.time()
        try:
            rows = self.connection.execute(
                f"SELECT seq, epoch_us(sent_at) FROM {self.table} WHERE seq > {self._contiguous}"
            ).fetchall()
        except duckdb.Error as exc:  # the table may not exist yet (the plain job creates its own)
            self.visibility.poll_errors += 1
            self.visibility.last_error = str(exc).splitlines()[0][:300]
            return 0
        finished = time.time()
        self.visibility.poll_seconds.append(finished - started)
        seen, sent = self.visibility.seen_at, self.visibility.sent_at
        new = 0
        for seq, sent_us in rows:
            if seq not in seen:
                seen[seq] = finished
                sent[seq] = sent_us / 1e6
                new += 1
        if new and self.visibility.first_visible_at is None:
            self.visibility.first_visible_at = finished
        while self._contiguous + 1 in seen:
            self._contiguous += 1
        return new
