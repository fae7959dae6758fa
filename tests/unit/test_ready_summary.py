"""`floe up`'s ready summary with hostile warehouse, namespace and table names: each engine line is parsed
as its language parses it (Python with `ast`, SQL with DuckDB's parser and tokenizer, the Spark command
with `shlex`, Trino's properties with java.util.Properties' rules) and must give back exactly the names,
as data; what cannot be written faithfully on a terminal line is withheld, and nothing in a name drives
the terminal or is read as Rich markup."""

from __future__ import annotations

import ast
import io
import json
import re
import shlex
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from rich.console import Console

from floe.cli.ready_summary import ready_summary
from tests.unit.test_console_snippets import HOSTILE, read_properties

NAMES = [
    *HOSTILE,
    "$(id)",
    "`id`",
    "a; rm -rf ~",
    "[bold red]markup[/bold red]",
    ":smile: :thumbs_up:",
    "\x1b]52;c;ZXZpbA==\x07osc",
    "\x9bcsi",
]
URL = "http://127.0.0.1:8181"
CLIENT_ID = "3f1c2a"
PLAIN = ("default", ("local",), "events")
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # every control character but the line break


@dataclass
class Table:
    """The parts of an ingested table the summary shows."""

    namespace: tuple[str, ...]
    table: str
    topic: str = "events"

    @property
    def name(self) -> str:
        return ".".join((*self.namespace, self.table))

    @property
    def dlq_table(self) -> str:
        return self.name + "_dlq"


def summary(warehouse: str, namespace: tuple[str, ...], table: str, client_id: str = CLIENT_ID) -> str:
    text = ready_summary(
        url=URL,
        home=Path("/tmp/floe-home"),
        client_id=client_id,
        warehouse=warehouse,
        tables=[Table(namespace, table, topic=table)],  # type: ignore[list-item]
        pipeline_keys=["pipeline-ingest-local"],
        broker="127.0.0.1:9092",
        logs=[Path("/tmp/floe-home/spark.log")],
        metrics_port=9464,
        maintenance=True,
        seconds=1.0,
    )
    return text.plain


def block(text: str, engine: str) -> list[str]:
    """The lines of `engine`'s block (its first line beside the name, the others indented below it, or
    flush left: DuckDB's Python program)."""
    lines = text.split("\n")
    (start,) = [i for i, line in enumerate(lines) if line.startswith(f"  {engine} ")]
    found = [lines[start][len("  ") + 11 :]]
    for line in lines[start + 1 :]:
        if line.startswith(" " * 13):
            found.append(line[13:])
        elif line and not line.startswith(" ") and not line.startswith("ready"):
            found.append(line)
        else:
            break
    return found


def duckdb_program(text: str) -> tuple[str, str, list[str]]:
    """DuckDB's block: its install line, its Python program, and the SQL the program runs after loading
    the extensions (CREATE SECRET, ATTACH, the query), each read from the program's string literals."""
    install, *program = block(text, "DuckDB")
    tree = ast.parse("\n".join(program))
    statements = [
        ast.literal_eval(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if node.func.attr in ("execute", "sql") and isinstance(node.args[0], ast.Constant)
    ]
    return install, "\n".join(program), statements


def call_of(tree: ast.AST, name: str) -> ast.Call:
    (found,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
        if (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == name
    ]
    return found


def identifier(value: Any) -> tuple[str, ...]:
    """What pyiceberg makes of an identifier argument: a string is split on dots."""
    return tuple(value.split(".")) if isinstance(value, str) else tuple(value)


def string_constants(sql: str) -> list[str]:
    """The values of the statement's string literals, each read by DuckDB itself."""
    encoded = sql.encode()
    tokens = duckdb.tokenize(sql)
    values = []
    for index, (start, kind) in enumerate(tokens):
        if kind == duckdb.token_type.string_const:
            end = tokens[index + 1][0] if index + 1 < len(tokens) else len(encoded)
            literal = encoded[start:end].decode().strip()
            row = duckdb.connect().execute(f"SELECT {literal}").fetchone()
            assert row is not None
            values.append(row[0])
    return values


def shapes(sql: str) -> list[str]:
    return [str(kind) for _, kind in duckdb.tokenize(sql)]


@pytest.mark.parametrize("name", NAMES)
def test_pyiceberg_line_holds_the_names_as_literals(name: str) -> None:
    (line,) = block(summary(name, (name, "inner"), name), "pyiceberg")
    tree = ast.parse(line, mode="eval")
    load = call_of(tree, "load_catalog")
    keywords = {k.arg: ast.literal_eval(k.value) for k in load.keywords}
    assert keywords == {
        "type": "rest",
        "uri": URL,
        "credential": f"{CLIENT_ID}:<client_secret>",
        "warehouse": name,
    }
    assert identifier(ast.literal_eval(call_of(tree, "load_table").args[0])) == (name, "inner", name)
    plain = ast.parse(block(summary(*PLAIN), "pyiceberg")[0], mode="eval")
    assert ast.dump(plain).count("Call(") == ast.dump(tree).count("Call(")  # nothing else is called


@pytest.mark.parametrize("name", NAMES)
def test_duckdb_lines_hold_the_names_as_sql_data_or_are_withheld(name: str) -> None:
    text = summary(name, (name,), name)
    lines = block(text, "DuckDB")
    if not name.isprintable():  # a quoted identifier has no escapes: a raw control character is not printed
        assert len(lines) == 1
        assert lines[0].startswith("not shown")
        return
    install, program, statements = duckdb_program(text)
    plain_install, plain_program, plain = duckdb_program(summary(*PLAIN))
    assert install == plain_install
    # The same program whatever the names: only the SQL literals differ, and each is the same statements.
    assert _without_strings(program) == _without_strings(plain_program)
    assert len(statements) == len(plain) == 3
    for statement, plain_statement in zip(statements, plain, strict=True):
        assert len(duckdb.extract_statements(statement)) == len(duckdb.extract_statements(plain_statement))
        assert shapes(statement) == shapes(plain_statement)  # the same statements, whatever the names
    secret, attach, query = statements
    assert string_constants(secret) == [CLIENT_ID, "<client_secret>", f"{URL}/v1/oauth/tokens"]
    assert string_constants(attach) == [name, URL]
    assert duckdb.extract_statements(attach)[0].type == duckdb.StatementType.ATTACH
    row = duckdb.connect().execute("SELECT json_serialize_sql(?)", [query]).fetchone()
    assert row is not None
    (parsed,) = json.loads(row[0])["statements"]
    table = parsed["node"]["from_table"]
    assert (table["catalog_name"], table["schema_name"], table["table_name"]) == ("floe", name, name)


def _without_strings(program: str) -> str:
    """The program's syntax tree with the SQL literals of its execute/sql calls blanked."""
    tree = ast.parse(program)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("execute", "sql")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            node.args[0] = ast.Constant("")
    return ast.dump(tree)


def test_duckdb_program_loads_the_extensions_from_the_wheels_of_the_duckdb_extra() -> None:
    """No `INSTALL iceberg` (a download, which fails offline): the program installs each extension from
    the file its `duckdb_extension_<name>` wheel ships, with automatic installs off; the first line names
    floe's `duckdb` extra, installed with floe's own interpreter, which pyproject.toml declares with
    the same pins as the test extra, pytz included."""
    text = summary(*PLAIN)
    install, program, _ = duckdb_program(text)
    python = shlex.quote(sys.executable)
    assert install == f"{python} -m pip install '.[duckdb]' in floe's folder; then paste into {python}:"
    assert "INSTALL iceberg" not in text
    assert '"autoinstall_known_extensions": False' in program
    assert 'files(f"duckdb_extension_{n}") / "extensions" / f"v{duckdb.__version__}"' in program
    assert all(line == line.lstrip() for line in program.splitlines())  # pasted into Python as it is
    assert not any(isinstance(node, ast.For | ast.With | ast.If) for node in ast.walk(ast.parse(program)))
    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(extras["duckdb"]) == {
        "duckdb==1.5.5",
        "duckdb-extension-iceberg==1.5.5",
        "duckdb-extension-httpfs==1.5.5",
        "duckdb-extension-avro==1.5.5",
        "pytz",
    }
    assert set(extras["duckdb"]) <= set(extras["test"])


def spark_confs(line: str) -> tuple[list[str], dict[str, str]]:
    words = shlex.split(line)
    confs = [words[i + 1] for i, word in enumerate(words) if word == "--conf"]
    return words, dict(conf.split("=", 1) for conf in confs)


@pytest.mark.parametrize("name", NAMES)
def test_spark_command_holds_the_warehouse_as_one_shell_word(name: str) -> None:
    (line,) = block(summary(name, (name,), name), "Spark")
    if "${" in name or not name.isprintable():
        assert line.startswith("not shown")
        return
    words, confs = spark_confs(line)
    plain_words, plain_confs = spark_confs(block(summary(*PLAIN), "Spark")[0])
    assert len(words) == len(plain_words)
    assert confs.keys() == plain_confs.keys()
    assert confs["spark.sql.catalog.floe.warehouse"] == name
    assert confs["spark.sql.catalog.floe.uri"] == URL
    assert confs["spark.sql.catalog.floe.credential"] == f"{CLIENT_ID}:<client_secret>"


@pytest.mark.parametrize("name", NAMES)
def test_trino_properties_read_back_the_warehouse_or_are_withheld(name: str) -> None:
    lines = block(summary(name, (name,), name), "Trino")
    if "${" in name:  # Trino would substitute it after loading the file
        assert len(lines) == 1
        assert lines[0].startswith("not shown")
        return
    assert lines[0] == "etc/catalog/floe.properties:"
    properties = read_properties("\n".join(lines[1:]) + "\n")
    plain = read_properties("\n".join(block(summary(*PLAIN), "Trino")[1:]) + "\n")
    assert properties.keys() == plain.keys()
    assert properties["iceberg.rest-catalog.warehouse"] == name
    assert properties["iceberg.rest-catalog.uri"] == URL
    assert all(line.isascii() for line in lines)


@pytest.mark.parametrize("name", NAMES)
def test_names_neither_drive_the_terminal_nor_are_markup(name: str) -> None:
    text = summary(name, (name,), name)
    assert not CONTROL.search(text)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=400)
    rendered = ready_summary(
        url=URL,
        home=Path("/tmp/floe-home"),
        client_id=CLIENT_ID,
        warehouse=name,
        tables=[Table((name,), name)],  # type: ignore[list-item]
        broker=None,
        logs=[],
        metrics_port=0,
        maintenance=False,
        seconds=1.0,
    )
    console.print(rendered, highlight=False, soft_wrap=True)
    printed = out.getvalue()
    assert not CONTROL.search(printed.replace("\x1b[1m", "").replace("\x1b[0m", ""))
    if name.isprintable():  # shown as it is: `[bold]` stays text, `:smile:` is no emoji
        assert f"warehouse '{name}'" in printed


def test_plain_names_print_as_readme_writes_them() -> None:
    text = summary(*PLAIN)
    assert (
        "\ncon.execute(\"ATTACH 'default' AS floe (TYPE ICEBERG, ENDPOINT 'http://127.0.0.1:8181', "
        'SECRET floe_key)")\n' in text
    )
    assert """\nprint(con.sql('SELECT count(*) FROM floe."local"."events"').fetchall())\n""" in text
    assert 'warehouse="default").load_table("local.events")' in text
    assert "--conf spark.sql.catalog.floe.warehouse=default " in text
    assert "iceberg.rest-catalog.warehouse=default\n" in text
    assert text.startswith("floe is ready (1.0 s)\n")
    assert text.split("\n")[-1].startswith("ready: produce JSON records to topic events on 127.0.0.1:9092")


def test_a_hostile_client_id_stays_data() -> None:
    hostile = "id'); DROP TABLE t; --\"$(id)"
    text = summary(*PLAIN, client_id=hostile)
    secret = duckdb_program(text)[2][0]
    assert string_constants(secret)[0] == hostile
    _, confs = spark_confs(block(text, "Spark")[0])
    assert confs["spark.sql.catalog.floe.credential"] == f"{hostile}:<client_secret>"
    keywords = {
        k.arg: ast.literal_eval(k.value)
        for k in call_of(ast.parse(block(text, "pyiceberg")[0], mode="eval"), "load_catalog").keywords
    }
    assert keywords["credential"] == f"{hostile}:<client_secret>"
