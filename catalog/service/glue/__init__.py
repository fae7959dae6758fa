"""AWS Glue Data Catalog publishing: every table of an S3 warehouse gets a Glue table pointing at its
current metadata file, so Athena, EMR, Redshift Spectrum and any Glue-catalog engine (pyiceberg's and
Iceberg Java's `GlueCatalog`) find floe's tables without talking to floe.

A Glue table looks exactly like the ones those `GlueCatalog`s write: database = the namespace (nested
levels joined with `_`), table = the table name (both lower-cased, as Glue stores them),
`TableType=EXTERNAL_TABLE`, `Parameters` with `table_type=ICEBERG`, `metadata_location`,
`previous_metadata_location` and the table's properties, and a `StorageDescriptor` with the table
location and its columns in Glue's type syntax. floe adds `floe.warehouse` (the warehouse id): floe only
updates or deletes Glue tables carrying its own warehouse's mark (or, with no mark, an Iceberg table
pointing at a metadata file of the same table's history, which floe then takes over).

Publishing never touches a commit's path: the publisher listens for `catalog.events.TableChanged` (its
listener is a dict insert), and a background task per process publishes. Notifications coalesce per
table, and a publish always writes the table's *current* state read from the store at publish time
(absent: the Glue table is deleted), so it never moves Glue backwards, whatever the order in which
workers or servers publish. Glue's table `VersionId` makes a concurrent publisher's stale write fail and
re-read instead of overwrite. Failures are retried with exponential backoff, for as long as it takes (an
unreachable Glue only delays).

Modules: `mapping` (Iceberg metadata as a Glue `TableInput`), `target` (where to publish), `publisher`
(the background publisher and its event listeners).
"""

from catalog.service.glue.mapping import (
    glue_columns,
    glue_database_name,
    glue_table_input,
    glue_table_name,
    glue_type,
    publishes_to_glue,
)
from catalog.service.glue.publisher import GluePublisher, GlueTableKey
from catalog.service.glue.target import ConfiguredGlueTarget, GlueTarget, GlueTargetProvider, describe_target

__all__ = [
    "ConfiguredGlueTarget",
    "GluePublisher",
    "GlueTableKey",
    "GlueTarget",
    "GlueTargetProvider",
    "describe_target",
    "glue_columns",
    "glue_database_name",
    "glue_table_input",
    "glue_table_name",
    "glue_type",
    "publishes_to_glue",
]
