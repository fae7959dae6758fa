"""Quoting for names written into code a user copies: a Python string literal, a SQL string literal or
quoted identifier, a Java properties value, a pyiceberg identifier.

Warehouse, namespace and table names are chosen by tenants and may hold any character; written with
these, a copied snippet runs with the name as data, never as code. Used by the console's connect page
and by `floe up`'s ready summary.
"""

from __future__ import annotations

from collections.abc import Sequence

# Spark and Trino read `${...}` in a configuration value as a reference to a variable (or an environment
# variable) after loading it: no escape prevents that, so a snippet holding it is not offered.
VARIABLE_REFERENCE = "${"


def python_string(value: str) -> str:
    """A Python string literal of `value`: Python's own `repr` (which escapes backslashes, quotes,
    line breaks and every non-printable character, bidirectional controls included), in double quotes
    unless the value holds a double quote."""
    literal = repr(value)
    if literal[0] == "'" and '"' not in value:
        return f'"{literal[1:-1]}"'  # repr chose ' only because the value has no quote at all
    return literal


def sql_string(value: str) -> str:
    """A standard SQL string literal: quotes doubled (backslashes are plain characters in SQL)."""
    return "'" + value.replace("'", "''") + "'"


def sql_identifier(value: str, quote: str = '"') -> str:
    """A quoted SQL identifier (`quote` doubled inside): `"` for DuckDB and Trino, "`" for Spark."""
    return quote + value.replace(quote, quote * 2) + quote


def sql_name(catalog: str, parts: Sequence[str], quote: str = '"') -> str:
    """`catalog.<namespace levels>.<table>` with every part after the catalog a quoted identifier."""
    return ".".join([catalog, *(sql_identifier(part, quote) for part in parts)])


def properties_value(value: str) -> str:
    """`value` as a Java properties value (`java.util.Properties.load` reads `value` back): backslashes
    and line breaks escaped, leading blanks kept, and every character outside printable ASCII as
    `\\uXXXX` (UTF-16), so the file reads the same as ISO-8859-1 (Java's default) and as UTF-8."""
    out: list[str] = []
    for index, char in enumerate(value):
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif char in " \t\f" and index == 0:
            out.append("\\" + {" ": " ", "\t": "t", "\f": "f"}[char])
        elif char == "\t":
            out.append("\\t")
        elif 0x20 <= code <= 0x7E:
            out.append(char)
        elif code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)


def pyiceberg_identifier(parts: Sequence[str]) -> str:
    """pyiceberg's identifier: the dotted string (README's form) unless a part holds a dot, which the
    dotted form would split, then a tuple."""
    if not any("." in part for part in parts):
        return python_string(".".join(parts))
    return "(" + ", ".join(python_string(part) for part in parts) + ("," if len(parts) == 1 else "") + ")"
