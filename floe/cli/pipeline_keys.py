"""Least-privilege keys for floe's own pipelines (`floe up`, `floe keys pipeline`).

Ingestion and maintenance do not run under the global admin key: each source cluster gets a writer key
for its ingestion (`pipeline-ingest-<cluster>`) and one for its maintenance (`pipeline-maintain-<cluster>`),
so the audit log shows pipeline traffic under keys of its own and a pipeline key can touch nothing but
its cluster's tables. floe creates them with the admin key, rotates them (a new secret, the old one
stops working at once) the first time a run asks for them, and keeps each in a file only its owner can
read, `$FLOE_HOME/keys/<name>.json` (`floe ingest --key-file` / `floe maintain --key-file` take one).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from catalog.client import FloeClient, IssuedKey, RequestFailed
from runtime.files import write_private

if TYPE_CHECKING:
    from ingest.service import CatalogAccess

KEYS_DIR = "keys"
INGEST = "ingest"
MAINTAIN = "maintain"
PURPOSES = (INGEST, MAINTAIN)


def key_name(purpose: str, cluster: str) -> str:
    """The key's description in floe (what `floe keys list` and the audit reader see)."""
    return f"pipeline-{purpose}-{cluster}"


def _file_stem(name: str) -> str:
    """`name` as a file name; one with other characters gets a digest so that two never share a file."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    if safe == name:
        return name
    return f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class PipelineKey:
    name: str
    cluster: str
    client_id: str
    client_secret: str = field(repr=False)

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "cluster": self.cluster,
                "role": "writer",
                "client_id": self.client_id,
                "client_secret": self.client_secret,
            },
            indent=2,
        )


def read_key_file(path: Path) -> tuple[str, str]:
    """(client_id, client_secret) of a key file (a pipeline key's, or admin.json); ValueError saying what
    is wrong, never the file's content."""
    try:
        data = json.loads(path.read_text())
        return str(data["client_id"]), str(data["client_secret"])
    except OSError as exc:
        raise ValueError(f"cannot read key file {path}: {exc.strerror}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"key file {path}: expected JSON with client_id and client_secret") from exc


class PipelineKeys:
    """The pipeline keys of one run, created or rotated on first use (thread-safe)."""

    def __init__(self, admin: FloeClient, home: Path) -> None:
        self.admin = admin
        self.directory = home / KEYS_DIR
        self._issued: dict[str, PipelineKey] = {}
        self._lock = threading.Lock()

    def path(self, purpose: str, cluster: str) -> Path:
        return self.directory / f"{_file_stem(key_name(purpose, cluster))}.json"

    def key(self, purpose: str, cluster: str) -> PipelineKey:
        """The cluster's key for `purpose`, with a secret fresh in this run."""
        name = key_name(purpose, cluster)
        with self._lock:
            key = self._issued.get(name)
            if key is None:
                key = self._issued[name] = self._renew(name, purpose, cluster)
            return key

    def issued(self) -> list[PipelineKey]:
        with self._lock:
            return list(self._issued.values())

    def _renew(self, name: str, purpose: str, cluster: str) -> PipelineKey:
        """Rotate the key the file names when it is this cluster's live key of that name, else create
        one; any other live key of that name (left behind by a lost file) is revoked."""
        path = self.path(purpose, cluster)
        try:
            stored_id: str | None = read_key_file(path)[0]
        except ValueError:
            stored_id = None
        live = [
            k
            for k in self.admin.keys(cluster)
            if k.description == name and k.revoked_at is None and k.cluster == cluster and k.role == "writer"
        ]
        kept = next((k for k in live if k.client_id == stored_id), None)
        for stale in live:
            if stale is not kept:
                self.admin.revoke_key(stale.client_id)
        issued: IssuedKey | None = None
        if kept is not None:
            try:
                issued = self.admin.rotate_key(kept.client_id)
            except RequestFailed:  # expired or revoked meanwhile: a new key
                issued = None
        if issued is None:
            issued = self.admin.create_key("writer", cluster=cluster, description=name)
        key = PipelineKey(name, cluster, issued.client_id, issued.client_secret)
        write_private(path, key.to_json())
        return key


def spark_catalog_name(purpose: str, cluster: str) -> str:
    """The Spark catalog a cluster's pipeline key writes through (one per key: a catalog holds one)."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", cluster)
    if safe != cluster:
        safe += "_" + hashlib.sha256(cluster.encode()).hexdigest()[:8]
    return f"floe_{purpose}_{safe}"


class IngestAccess:
    """`IngestService.access_for` of `floe up`: each cluster's tables through its `pipeline-ingest` key."""

    def __init__(self, keys: PipelineKeys, url: str, warehouse: str) -> None:
        self.keys = keys
        self.url = url
        self.warehouse = warehouse
        self._clients: dict[str, FloeClient] = {}
        self._lock = threading.Lock()

    def __call__(self, cluster: str) -> CatalogAccess:
        from ingest.service import CatalogAccess
        from runtime.spark import CatalogConnection

        key = self.keys.key(INGEST, cluster)
        with self._lock:
            client = self._clients.get(cluster)
            if client is None:
                client = FloeClient(self.url, key.client_id, key.client_secret, purpose="the ingestion")
                self._clients[cluster] = client
        connection = CatalogConnection(
            self.url,
            self.warehouse,
            key.client_id,
            key.client_secret,
            spark_catalog=spark_catalog_name(INGEST, cluster),
        )
        return CatalogAccess(client, connection)

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
