"""The `floe` command line: the one place that imports every part of floe.

One module per command family, each a plain click command or group that `main` collects:

- `serve`: the catalog server; `db`: its schema; `warehouses`: storage locations (database direct);
- `clusters`: clusters, API keys and the audit log; `apply`: floe.yaml (against a running server);
- `ingest`, `maintain`: the ingestion service and the maintenance worker;
- `up`: the whole product on one machine; `status`: ingestion lag and maintenance passes; `wait`:
  until a table is complete through a time (its watermark); `dlq`: dead-letter redrive;
  `replay`: a range of a topic rebuilt;
- `dev`: local development components (`devtools`); `openapi`: the generated OpenAPI document;
  `config-doc`: the table of every `FLOE_*` variable, generated from the settings classes.

Shared: `errors` (user errors as one message, never a traceback), `output` (console, `--output`),
`remote` (credentials, management API calls), `settings` (the command line's `FLOE_*` variables) and
`services` (logging, Spark options, checks of the long-running commands). Nothing outside this package
imports it (tests/unit/test_architecture.py).
"""

from __future__ import annotations

import click

from floe.cli.apply import apply
from floe.cli.clusters import audit, clusters, keys
from floe.cli.config_doc import config_doc
from floe.cli.db import db
from floe.cli.dev import dev
from floe.cli.dlq import dlq
from floe.cli.errors import FloeGroup
from floe.cli.ingest import ingest_command
from floe.cli.maintain import maintain_command
from floe.cli.openapi import openapi
from floe.cli.replay import replay_command
from floe.cli.serve import serve
from floe.cli.snapshot_at import snapshot_at_command
from floe.cli.status import status_command
from floe.cli.up import up_command
from floe.cli.wait import wait_command
from floe.cli.warehouses import warehouses


@click.group(cls=FloeGroup)
@click.version_option(package_name="floe")
def main() -> None:
    """floe: Kafka topics as Apache Iceberg tables, served by floe's own Iceberg REST catalog."""


for _command in (
    serve,
    db,
    warehouses,
    clusters,
    keys,
    audit,
    apply,
    openapi,
    config_doc,
    dev,
    ingest_command,
    status_command,
    up_command,
    maintain_command,
    snapshot_at_command,
    wait_command,
    dlq,
    replay_command,
):
    main.add_command(_command)
