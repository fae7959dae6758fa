"""DuckDB as a real Iceberg REST client of floe, with its extensions loaded from the installed wheels.

The `iceberg`, `httpfs` and `avro` extensions come from the PyPI packages `duckdb_extension_iceberg`,
`duckdb_extension_httpfs` and `duckdb_extension_avro` (pinned to the DuckDB version). Automatic
extension download is switched off, so a test never reaches the network for them.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import duckdb

EXTENSIONS = ("httpfs", "avro", "iceberg")
_PROGRESS_BAR = re.compile(r"\s*\d+%\s*▕")


def printed_lines(stdout: str) -> list[str]:
    """A DuckDB program's printed lines without the progress bar DuckDB draws on stdout for a query past two
    seconds (a busy machine): what the reader sees above the answer is not the answer."""
    return [line for line in stdout.splitlines() if line.strip() and not _PROGRESS_BAR.match(line)]


def extension_file(name: str) -> Path:
    """The `<name>.duckdb_extension` file shipped inside the `duckdb_extension_<name>` package."""
    package = importlib.import_module(f"duckdb_extension_{name}")
    package_dir = Path(str(package.__file__)).parent
    files = sorted(package_dir.rglob(f"{name}.duckdb_extension"))
    version_dir = f"v{duckdb.__version__}"
    matching = [path for path in files if version_dir in path.parts]
    if not (matching or files):
        raise FileNotFoundError(f"No {name}.duckdb_extension under {package_dir}")
    return (matching or files)[0]


def connect(extension_directory: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with iceberg, httpfs and avro installed from the wheels into
    `extension_directory` (kept out of the user's `~/.duckdb`) and loaded."""
    connection = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "extension_directory": str(extension_directory),
            # A missing table must be an error, not a scan of a same-named Python variable.
            "python_enable_replacements": False,
        }
    )
    installed = {
        str(row[0])
        for row in connection.execute(
            "SELECT extension_name FROM duckdb_extensions() WHERE installed AND install_path <> '(BUILT-IN)'"
        ).fetchall()
    }
    for name in EXTENSIONS:
        # INSTALL copies a ~50 MB file: once per extension directory is enough.
        if name not in installed:
            connection.execute(f"INSTALL '{extension_file(name)}'")
        connection.execute(f"LOAD {name}")
    return connection


def attach_catalog(
    connection: duckdb.DuckDBPyConnection,
    *,
    endpoint: str,
    warehouse: str,
    client_id: str,
    client_secret: str,
    alias: str = "floe",
) -> None:
    """Attach floe's REST catalog as database `alias`, authenticating with an API key as OAuth2 client
    credentials (DuckDB fetches and refreshes the token itself)."""
    connection.execute(
        f"CREATE OR REPLACE SECRET {alias}_secret (TYPE ICEBERG, CLIENT_ID '{client_id}', "
        f"CLIENT_SECRET '{client_secret}', OAUTH2_SERVER_URI '{endpoint}/v1/oauth/tokens')"
    )
    connection.execute(
        f"ATTACH '{warehouse}' AS {alias} (TYPE ICEBERG, ENDPOINT '{endpoint}', SECRET {alias}_secret)"
    )


def quote(identifier: str) -> str:
    """A DuckDB-quoted identifier."""
    return '"' + identifier.replace('"', '""') + '"'
