"""What `floe up` prints when it is ready: where everything is, and how to query it from each engine.

The engine lines are code a user copies into Python, DuckDB's SQL, a shell and a properties file; the
warehouse, table and key names in them are written in each language's quoting (`catalog.snippet_quoting`,
`shlex.quote`), so a name is data there, never code. The summary is a Rich `Text`: nothing in a name is
read as markup or an emoji code, and control characters are shown as escapes (`printable`).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from catalog.snippet_quoting import (
    VARIABLE_REFERENCE,
    properties_value,
    pyiceberg_identifier,
    python_string,
    sql_name,
    sql_string,
)
from floe.cli.output import printable

if TYPE_CHECKING:
    from ingest.ingest_table import IngestTable

# The secret is never printed: terminals are scrolled back, recorded and pasted into tickets. The
# snippets carry this placeholder and the summary says where the secret is.
SECRET_PLACEHOLDER = "<client_secret>"
SPARK_PACKAGES = "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.11.0"
INDENT = " " * 13


DUCKDB_SETUP = [
    "import duckdb",
    "from importlib.resources import files",
    "con = duckdb.connect(config="
    '{"autoinstall_known_extensions": False, "autoload_known_extensions": False})',
    'paths = {n: files(f"duckdb_extension_{n}") / "extensions" / f"v{duckdb.__version__}" / '
    'f"{n}.duckdb_extension" for n in ("httpfs", "avro", "iceberg")}',
    'con.execute("".join(f"INSTALL \'{path}\'; LOAD {n};" for n, path in paths.items()))',
]


def duckdb_lines(
    *, url: str, client_id: str, warehouse: str, table: Sequence[str] | None, python: str = sys.executable
) -> list[str]:
    """A Python program for DuckDB: its extensions installed from floe's `duckdb` extra's wheels (as the
    console's connect snippet does: DuckDB's own `INSTALL iceberg` downloads, and fails offline), then
    the statements, each a Python string literal of SQL with names as string literals and quoted
    identifiers. One simple statement a line, flush left: pasted into Python as it is."""
    tokens = f"{url}/v1/oauth/tokens"
    if not all(value.isprintable() for value in (url, client_id, warehouse, *(table or ()))):
        # The SQL's quoted identifiers have no escapes: such a name would be printed raw in the SQL that
        # people read and edit here (the pyiceberg line, Python only, shows it escaped).
        return ["not shown: a name holds a line break or control character (see the pyiceberg line)"]
    target = sql_name("floe", table) if table else "floe.<namespace>.<table>"
    create_secret = (
        f"CREATE SECRET floe_key (TYPE ICEBERG, CLIENT_ID {sql_string(client_id)}, "
        f"CLIENT_SECRET {sql_string(SECRET_PLACEHOLDER)}, OAUTH2_SERVER_URI {sql_string(tokens)})"
    )
    attach = (
        f"ATTACH {sql_string(warehouse)} AS floe (TYPE ICEBERG, ENDPOINT {sql_string(url)}, SECRET floe_key)"
    )
    return [
        # floe's `duckdb` extra: DuckDB 1.5.5, its iceberg, httpfs and avro extensions as wheels, and pytz
        # (DuckDB needs it to return a timestamptz to Python); into floe's own environment.
        f"{shlex.quote(python)} -m pip install '.[duckdb]' in floe's folder; "
        f"then paste into {shlex.quote(python)}:",
        *DUCKDB_SETUP,
        f"con.execute({python_string(create_secret)})",
        f"con.execute({python_string(attach)})",
        f"print(con.sql({python_string(f'SELECT count(*) FROM {target}')}).fetchall())",
    ]


def pyiceberg_line(*, url: str, client_id: str, warehouse: str, table: Sequence[str] | None) -> str:
    """pyiceberg's one-liner: every value a Python string literal."""
    identifier = pyiceberg_identifier(table) if table else python_string("<namespace>.<table>")
    return (
        f'load_catalog("floe", type="rest", uri={python_string(url)}, '
        f"credential={python_string(f'{client_id}:{SECRET_PLACEHOLDER}')}, "
        f"warehouse={python_string(warehouse)}).load_table({identifier}).scan().to_arrow()"
    )


def _catalog_options(url: str, client_id: str, warehouse: str) -> list[tuple[str, str]]:
    return [
        ("uri", url),
        ("warehouse", warehouse),
        ("credential", f"{client_id}:{SECRET_PLACEHOLDER}"),
        ("oauth2-server-uri", f"{url}/v1/oauth/tokens"),
    ]


def spark_line(*, url: str, client_id: str, warehouse: str) -> str:
    """The pyspark command: each `--conf` a shell word (`shlex.quote`)."""
    options = _catalog_options(url, client_id, warehouse)
    if any(VARIABLE_REFERENCE in value for _, value in options):
        return "not shown: the URL or warehouse contains '${', which Spark reads as a variable"
    if not all(value.isprintable() for _, value in options):
        return "not shown: a name holds a line break or control character (see the pyiceberg line)"
    confs = [
        ("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"),
        ("spark.sql.catalog.floe", "org.apache.iceberg.spark.SparkCatalog"),
        ("spark.sql.catalog.floe.type", "rest"),
        *((f"spark.sql.catalog.floe.{key}", value) for key, value in options),
        ("spark.sql.catalog.floe.scope", "catalog"),
    ]
    return " ".join(
        ["pyspark", "--packages", SPARK_PACKAGES, *(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in confs)]
    )


def trino_lines(*, url: str, client_id: str, warehouse: str) -> list[str]:
    """etc/catalog/floe.properties, one property a line: values in properties escaping."""
    uri, warehouse, credential, token_uri = (v for _, v in _catalog_options(url, client_id, warehouse))
    if any(VARIABLE_REFERENCE in value for value in (uri, warehouse, credential, token_uri)):
        return ["not shown: the URL or warehouse contains '${', which Trino reads as a variable"]
    properties = [
        ("connector.name", "iceberg"),
        ("iceberg.catalog.type", "rest"),
        ("iceberg.rest-catalog.uri", uri),
        ("iceberg.rest-catalog.warehouse", warehouse),
        ("iceberg.rest-catalog.security", "OAUTH2"),
        ("iceberg.rest-catalog.oauth2.credential", credential),
        ("iceberg.rest-catalog.oauth2.server-uri", token_uri),
        ("fs.native-local.enabled", "true"),
        ("local.location", "/"),
    ]
    return ["etc/catalog/floe.properties:", *(f"{key}={properties_value(v)}" for key, v in properties)]


def ready_summary(
    *,
    url: str,
    home: Path,
    client_id: str,
    warehouse: str,
    tables: Sequence[IngestTable],
    pipeline_keys: Sequence[str] = (),
    broker: str | None,
    logs: Sequence[Path],
    metrics_port: int,
    maintenance: bool,
    seconds: float,
) -> Text:
    """What `floe up` prints when it is ready: where everything is, and how to query and stop."""
    first = [*tables[0].namespace, tables[0].table] if tables else None
    names = {"url": url, "client_id": client_id, "warehouse": warehouse}
    lines = [
        f"  catalog      {url}  (Iceberg REST, warehouse '{warehouse}')",
        f"  console      {url}/console  (sign in with the admin key"
        + ("; lag and records/s from ingestion's metrics)" if metrics_port else ")"),
        f"  admin key    {home / 'admin.json'}  (client_id {client_id})",
    ]
    if pipeline_keys:
        lines.append(
            f"  pipeline     keys {', '.join(pipeline_keys)} in {home / 'keys'}  (new secrets at each start)"
        )
    if broker:
        lines.append(f"  Kafka        {broker}  (run by floe up; data in {home / 'kafka'})")
    for table in tables:
        lines.append(
            f"  ingesting    topic {table.topic} → table {table.name} (bad records: {table.dlq_table})"
        )
    if not tables:
        lines.append("  ingesting    nothing yet: add tables to floe.yaml and run floe apply -f floe.yaml")
    lines.append(
        f"  status       floe status  (metrics http://127.0.0.1:{metrics_port}/metrics)"
        if metrics_port
        else "  status       floe status --url …  (metrics off)"
    )
    lines.append(
        "  maintenance  compaction, snapshot expiry and orphan removal every 10 min (--no-maintenance: off)"
        if maintenance
        else "  maintenance  off (--no-maintenance); run floe maintain yourself"
    )
    lines.append("  logs         " + ", ".join(str(p) for p in logs))
    lines.append(f"query it with ({SECRET_PLACEHOLDER}: client_secret in {home / 'admin.json'})")
    lines += _block("DuckDB", duckdb_lines(**names, table=first), indent="")
    lines += _block("pyiceberg", [pyiceberg_line(**names, table=first)])
    lines += _block("Spark", [spark_line(**names)])
    lines += _block("Trino", trino_lines(**names))
    lines.append("  (README, Connecting engines: each engine's block in full)")
    topic = tables[0].topic if tables else None
    produce = f"produce JSON records to topic {topic} on {broker}; " if topic and broker else ""
    summary = Text()
    summary.append("floe is ready", style="bold green")
    summary.append(f" ({seconds:.1f} s)\n")
    for line in lines:
        summary.append(printable(line) + "\n")
    summary.append("ready", style="bold")
    summary.append(printable(f": {produce}Ctrl-C stops floe (everything stays in {home})"))
    return summary


def _block(engine: str, lines: list[str], indent: str = INDENT) -> list[str]:
    """An engine's lines under its name, the first beside it (a Python program's flush left: Python
    refuses indented lines)."""
    return [f"  {engine:<9}  {lines[0]}", *(f"{indent}{line}" for line in lines[1:])]
