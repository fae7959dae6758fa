"""The connect page's snippets: README's "Connecting engines" blocks with this server's URL, the table's
warehouse and name filled in (the API key stays a placeholder: the console never knows a secret)."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.console.readings import TableRef


@dataclass(frozen=True, slots=True)
class Snippet:
    engine: str
    language: str
    note: str
    text: str


DUCKDB_PACKAGES = " ".join(
    ["'duckdb==1.5.5'", *(f"duckdb-extension-{name}==1.5.5" for name in ("iceberg", "httpfs", "avro"))]
)


def _sql_name(ref: TableRef) -> str:
    return ".".join(f'"{part}"' if not part.isidentifier() else part for part in [*ref.namespace, ref.name])


def connect_snippets(url: str, ref: TableRef) -> list[Snippet]:
    """pyiceberg, DuckDB, Spark and Trino, as README writes them, for `ref` on the server at `url`."""
    warehouse = ref.warehouse
    dotted = ".".join([*ref.namespace, ref.name])
    namespace = ".".join(ref.namespace)
    token_url = f"{url}/v1/oauth/tokens"
    pyiceberg = f"""from pyiceberg.catalog import load_catalog

catalog = load_catalog(
    "floe",
    type="rest",
    uri="{url}",
    credential="CLIENT_ID:CLIENT_SECRET",
    warehouse="{warehouse}",
)
print(catalog.list_tables("{namespace}"))
print(catalog.load_table("{dotted}").scan().to_arrow().num_rows)
"""
    duckdb = f"""# pip install {DUCKDB_PACKAGES}
from importlib.resources import files

import duckdb

con = duckdb.connect(config={{"autoinstall_known_extensions": False, "autoload_known_extensions": False}})
for name in ("httpfs", "avro", "iceberg"):
    wheel = files(f"duckdb_extension_{{name}}") / "extensions" / f"v{{duckdb.__version__}}"
    con.execute(f"INSTALL '{{wheel / (name + '.duckdb_extension')}}'")
    con.execute(f"LOAD {{name}}")
con.execute(\"\"\"
    CREATE SECRET floe_key (TYPE ICEBERG, CLIENT_ID 'CLIENT_ID', CLIENT_SECRET 'CLIENT_SECRET',
                            OAUTH2_SERVER_URI '{token_url}');
    ATTACH '{warehouse}' AS floe (TYPE ICEBERG, ENDPOINT '{url}', SECRET floe_key);
\"\"\")
print(con.sql("SELECT count(*) FROM floe.{_sql_name(ref)}").fetchall())
"""
    spark = f"""spark.jars.packages=org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.11.0
spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions
spark.sql.catalog.floe=org.apache.iceberg.spark.SparkCatalog
spark.sql.catalog.floe.type=rest
spark.sql.catalog.floe.uri={url}
spark.sql.catalog.floe.warehouse={warehouse}
spark.sql.catalog.floe.credential=CLIENT_ID:CLIENT_SECRET
spark.sql.catalog.floe.oauth2-server-uri={token_url}
spark.sql.catalog.floe.scope=catalog
"""
    trino = f"""connector.name=iceberg
iceberg.catalog.type=rest
iceberg.rest-catalog.uri={url}
iceberg.rest-catalog.warehouse={warehouse}
iceberg.rest-catalog.security=OAUTH2
iceberg.rest-catalog.oauth2.credential=CLIENT_ID:CLIENT_SECRET
iceberg.rest-catalog.oauth2.server-uri={token_url}
fs.native-local.enabled=true
local.location=/
"""
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
            f"Spark 4.0 with Iceberg 1.11's runtime; then `SELECT * FROM floe.{dotted}`.",
            spark,
        ),
        Snippet(
            "Trino",
            "properties",
            "Trino 476, etc/catalog/floe.properties for a local warehouse (README shows the S3 variant with "
            f"vended credentials); then `SELECT * FROM floe.{_sql_name(ref)}`.",
            trino,
        ),
    ]
