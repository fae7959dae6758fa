"""The connect page's snippets: README's "Connecting engines" blocks with this server's URL, the table's
warehouse and name filled in (the API key stays a placeholder: the console never knows a secret).

Warehouse, namespace and table names are chosen by tenants and may hold any character: each is written
in its target language's quoting (a Python string literal, a SQL string literal or quoted identifier,
a Java properties value, from `catalog.snippet_quoting`), so a copied snippet runs with the name as data,
never as code.
"""

from __future__ import annotations

from dataclasses import dataclass

from catalog.console.readings import TableRef
from catalog.snippet_quoting import (
    VARIABLE_REFERENCE,
    properties_value,
    pyiceberg_identifier,
    python_string,
    sql_identifier,
    sql_name,
    sql_string,
)

__all__ = [
    "Snippet",
    "connect_snippets",
    "properties_value",
    "python_string",
    "sql_identifier",
    "sql_string",
    "sql_table",
]


@dataclass(frozen=True, slots=True)
class Snippet:
    engine: str
    language: str
    note: str
    text: str


DUCKDB_PACKAGES = " ".join(
    ["'duckdb==1.5.5'", *(f"duckdb-extension-{name}==1.5.5" for name in ("iceberg", "httpfs", "avro"))]
)


def sql_table(ref: TableRef, quote: str = '"') -> str:
    """`floe.<namespace levels>.<table>` with every part a quoted identifier."""
    return sql_name("floe", [*ref.namespace, ref.name], quote)


def _properties(lines: list[tuple[str, str]], engine: str) -> str:
    """A properties file of (key, value) lines; none at all when a value holds `${`, which Spark and
    Trino read as a reference to a variable or an environment variable after loading the file (no
    escape prevents that)."""
    if any(VARIABLE_REFERENCE in value for _, value in lines):
        return (
            f"# Not shown: this server's URL or the warehouse's name contains '${{', which {engine}\n"
            "# would read as a reference to a variable. Set these options in code instead.\n"
        )
    return "".join(f"{key}={properties_value(value)}\n" for key, value in lines)


def connect_snippets(url: str, ref: TableRef) -> list[Snippet]:
    """pyiceberg, DuckDB, Spark and Trino, as README writes them, for `ref` on the server at `url`."""
    warehouse = ref.warehouse
    token_url = f"{url}/v1/oauth/tokens"
    pyiceberg = f"""from pyiceberg.catalog import load_catalog

catalog = load_catalog(
    "floe",
    type="rest",
    uri={python_string(url)},
    credential="CLIENT_ID:CLIENT_SECRET",
    warehouse={python_string(warehouse)},
)
print(catalog.list_tables({pyiceberg_identifier(list(ref.namespace))}))
print(catalog.load_table({pyiceberg_identifier([*ref.namespace, ref.name])}).scan().to_arrow().num_rows)
"""
    create_secret = (
        "CREATE SECRET floe_key (TYPE ICEBERG, CLIENT_ID 'CLIENT_ID', CLIENT_SECRET 'CLIENT_SECRET', "
        f"OAUTH2_SERVER_URI {sql_string(token_url)})"
    )
    attach = (
        f"ATTACH {sql_string(warehouse)} AS floe (TYPE ICEBERG, ENDPOINT {sql_string(url)}, SECRET floe_key)"
    )
    duckdb = f"""# pip install {DUCKDB_PACKAGES}
from importlib.resources import files

import duckdb

con = duckdb.connect(config={{"autoinstall_known_extensions": False, "autoload_known_extensions": False}})
for name in ("httpfs", "avro", "iceberg"):
    wheel = files(f"duckdb_extension_{{name}}") / "extensions" / f"v{{duckdb.__version__}}"
    con.execute(f"INSTALL '{{wheel / (name + '.duckdb_extension')}}'")
    con.execute(f"LOAD {{name}}")
con.execute({python_string(create_secret)})
con.execute({python_string(attach)})
print(con.sql({python_string(f"SELECT count(*) FROM {sql_table(ref)}")}).fetchall())
"""
    spark = "spark.jars.packages=org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.11.0\n" + _properties(
        [
            ("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"),
            ("spark.sql.catalog.floe", "org.apache.iceberg.spark.SparkCatalog"),
            ("spark.sql.catalog.floe.type", "rest"),
            ("spark.sql.catalog.floe.uri", url),
            ("spark.sql.catalog.floe.warehouse", warehouse),
            ("spark.sql.catalog.floe.credential", "CLIENT_ID:CLIENT_SECRET"),
            ("spark.sql.catalog.floe.oauth2-server-uri", token_url),
            ("spark.sql.catalog.floe.scope", "catalog"),
        ],
        "Spark",
    )
    trino = _properties(
        [
            ("connector.name", "iceberg"),
            ("iceberg.catalog.type", "rest"),
            ("iceberg.rest-catalog.uri", url),
            ("iceberg.rest-catalog.warehouse", warehouse),
            ("iceberg.rest-catalog.security", "OAUTH2"),
            ("iceberg.rest-catalog.oauth2.credential", "CLIENT_ID:CLIENT_SECRET"),
            ("iceberg.rest-catalog.oauth2.server-uri", token_url),
            ("fs.native-local.enabled", "true"),
            ("local.location", "/"),
        ],
        "Trino",
    )
    return [
        Snippet("pyiceberg", "python", "pyiceberg 0.12.", pyiceberg),
        Snippet(
            "DuckDB",
            "python",
            "DuckDB 1.5.5 with its extensions from their PyPI wheels (nothing downloaded when run).",
            duckdb,
        ),
        Snippet(
            "Spark",
            "properties",
            f"Spark 4.0 with Iceberg 1.11's runtime; then `SELECT * FROM {sql_table(ref, '`')}`.",
            spark,
        ),
        Snippet(
            "Trino",
            "properties",
            "Trino 476, etc/catalog/floe.properties for a local warehouse (README shows the S3 variant with "
            f"vended credentials); then `SELECT * FROM {sql_table(ref)}`.",
            trino,
        ),
    ]
