"""An `IngestTable` for the tests of every tier that need one without a pipeline behind it: an inline
JSON append table, by default of cluster `local` reading a topic named after it."""

from __future__ import annotations

from collections.abc import Mapping

from pyiceberg.schema import Schema

from ingest.ingest_table import IngestTable


def json_table(
    name: str,
    *,
    cluster: str = "local",
    topic: str | None = None,
    consumer_config: Mapping[str, str] | None = None,
) -> IngestTable:
    """Table `name` (and `{name}_dlq`) of namespace `cluster`, reading `topic` (default: `name`)."""
    return IngestTable(
        cluster=cluster,
        topic=topic or name,
        warehouse="default",
        namespace=(cluster,),
        table=name,
        dlq_table=f"{name}_dlq",
        source_format="json",
        schema=Schema(),
        kafka_options={},
        consumer_config=dict(consumer_config or {}),
        commit_interval=1.0,
    )
