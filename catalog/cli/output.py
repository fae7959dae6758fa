"""How commands print: status lines on stderr, results on stdout as a table or JSON (`--output`)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

# Status and progress lines: stderr, so stdout carries only a command's result.
console = Console(stderr=True)

OUTPUT = click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True
)


def emit(output: str, payload: Any, rows: list[dict[str, Any]], columns: list[str]) -> None:
    """`payload` as JSON, or `rows` as a table of `columns` (an absent value is an empty cell)."""
    if output == "json":
        click.echo(json.dumps(payload, indent=2, default=str))
        return
    table = Table(*columns)
    for row in rows:
        table.add_row(*["" if row.get(c) is None else str(row.get(c)) for c in columns])
    Console().print(table)
