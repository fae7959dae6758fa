"""What table operations take and give: typed requests (create, register, a parsed commit entry), a loaded
table (`LoadTableResult`), and the pure helpers of the load path (location, ETag)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from catalog import commit as core
from catalog.errors import BadRequest
from catalog.identifiers import Namespace, TableIdent
from catalog.storage import StorageCredential

if TYPE_CHECKING:
    from catalog.service.quotas import Limits


@dataclass(frozen=True, slots=True)
class TableCreation:
    """A createTable request. The schema, partition spec and sort order stay the spec's JSON objects: the
    pure commit core parses them with pyiceberg (and words their errors as clients expect)."""

    name: str
    schema: Mapping[str, Any]
    location: str | None = None
    partition_spec: Mapping[str, Any] | None = None
    write_order: Mapping[str, Any] | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    stage_create: bool = False


@dataclass(frozen=True, slots=True)
class TableRegistration:
    """A registerTable request: an existing metadata file to take into the catalog."""

    name: str
    metadata_location: str
    overwrite: bool = False


@dataclass(frozen=True, slots=True)
class LoadedTable:
    """A `LoadTableResult`, with the metadata kept as the JSON text the store holds."""

    metadata_location: str | None
    metadata_json: str
    config: dict[str, str]
    etag: str | None = None
    # Vended storage credentials (also merged into `config`, where clients without
    # `storage-credentials` support look); never part of the ETag.
    storage_credentials: tuple[StorageCredential, ...] = ()
    # The response rendered once (`rendered`), for loads answered from the cache.
    body: bytes | None = field(default=None, compare=False, repr=False)

    def rendered(self) -> LoadedTable:
        """This result with its response bytes computed once."""
        return self if self.body is not None else replace(self, body=self.to_json())

    def to_json(self) -> bytes:
        if self.body is not None:
            return self.body
        # The stored metadata is embedded as is: no parse and re-serialize on the read path.
        head = (
            '{"metadata-location":' + json.dumps(self.metadata_location) + ","
            if self.metadata_location
            else "{"
        )
        tail = ""
        if self.storage_credentials:
            tail = ',"storage-credentials":' + json.dumps(
                [{"prefix": c.prefix, "config": c.config} for c in self.storage_credentials]
            )
        return (
            head + '"metadata":' + self.metadata_json + ',"config":' + json.dumps(self.config) + tail + "}"
        ).encode()

    def with_credentials(self, credential: StorageCredential | None) -> LoadedTable:
        if credential is None:
            return self
        return replace(
            self,
            config={**self.config, **credential.config},
            storage_credentials=(credential,),
            body=None,
        )


@dataclass(frozen=True, slots=True)
class TableChange:
    """One entry of a commit: the table, its requirements and updates, as parsed from the request."""

    ident: TableIdent
    requirements: tuple[core.TableRequirement, ...]
    updates: tuple[Any, ...]


# The table's location in metadata JSON as the store holds it (pyiceberg's serialization, where it is the
# third field): found without parsing the whole document on the load path.
_LOCATION = re.compile(r'"location"\s*:\s*"((?:[^"\\]|\\.)*)"')


def table_location(metadata_json: str) -> str:
    head = metadata_json[:4096]
    match = _LOCATION.search(head)
    if match is not None and head.find('"location"') == match.start():
        return str(json.loads(f'"{match.group(1)}"'))
    return str(json.loads(metadata_json)["location"])


def table_etag(metadata_location: str | None, snapshots: str) -> str:
    digest = hashlib.sha256(f"{metadata_location}|{snapshots}".encode()).hexdigest()[:40]
    return f'"{digest}"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    candidates = [c.strip() for c in if_none_match.split(",")]
    return "*" in candidates or etag in candidates or f"W/{etag}" in candidates


def parse_change(body: Any, ident: TableIdent | None = None, limits: Limits | None = None) -> TableChange:
    """Parse a `CommitTableRequest`; the identifier comes from the path for single-table commits. With
    `limits`, added schemas and properties are checked against them before they are parsed."""
    if not isinstance(body, dict):
        raise BadRequest("Invalid commit request: body must be a JSON object")
    if ident is None:
        raw = body.get("identifier")
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise BadRequest("Invalid table change: 'identifier' with 'namespace' and 'name' is required")
        if not isinstance(raw.get("namespace"), list):
            raise BadRequest("Invalid table change: 'identifier.namespace' must be an array")
        ident = TableIdent(Namespace.of(raw["namespace"]), raw["name"])
    if limits is not None:
        limits.check_updates_json(body.get("updates"))
    return TableChange(
        ident=ident,
        requirements=core.parse_requirements(body.get("requirements")),
        updates=core.parse_table_updates(body.get("updates")),
    )
