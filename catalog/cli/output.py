"""How commands print: status lines on stderr, results on stdout as a table or JSON (`--output`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click
import msgspec
from rich.console import Console
from rich.table import Table

# Status and progress lines: stderr, so stdout carries only a command's result.
console = Console(stderr=True)

OUTPUT = click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True
)


def as_json(value: Any) -> Any:
    """`value` (the client's structs, in lists and dicts) as JSON values, shaped as the server sent them."""
    return msgspec.to_builtins(value)


def emit(output: str, payload: Any, rows: Sequence[Any], columns: list[str]) -> None:
    """`payload` as JSON, or `rows` as a table of `columns` (an absent value is an empty cell)."""
    if output == "json":
        click.echo(json.dumps(as_json(payload), indent=2, default=str))
        return
    table = Table(*columns)
    for row in as_json(list(rows)):
        table.add_row(*["" if row.get(c) is None else str(row.get(c)) for c in columns])
    Console().print(table)
