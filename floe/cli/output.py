"""How commands print: status lines on stderr, results on stdout as a table or JSON (`--output`)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click
import msgspec
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

# Status and progress lines: stderr, so stdout carries only a command's result.
console = Console(stderr=True)

# Every command that lists or shows state takes this option, the same way.
OUTPUT = click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True
)


def as_json(value: Any) -> Any:
    """`value` (the client's structs, in lists and dicts) as JSON values, shaped as the server sent them."""
    return msgspec.to_builtins(value)


# Cells typed back into other commands (`floe keys rotate <client_id>`, a table name): always whole.
IDENTIFIERS = frozenset({"client_id", "client_secret", "name", "table", "location"})


@dataclass(frozen=True)
class Column:
    """A column of a printed table."""

    name: str
    identifier: bool = False  # shown whole, never cut (folded only when nothing else can give way)
    optional: int = 0  # 0: always shown; else left out, highest first, when the table does not fit
    justify: JustifyMethod = "left"


def fitted_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    width: int | None = None,
) -> Table:
    """A table of `rows` that fits the terminal's width (or `width`) without cutting a cell: identifiers
    stay whole, optional columns are left out while the others' words would not fit, and what is left
    wraps (words folded only as a last resort)."""
    width = width or Console().width
    rows = [[printable(text) for text in row] for row in rows]

    def needs(i: int) -> int:
        """Column i's width without breaking a word (an identifier: without wrapping at all)."""
        texts = [columns[i].name, *(row[i] for row in rows)]
        if columns[i].identifier:
            return max(len(t) for t in texts)
        return max((len(word) for t in texts for word in t.split()), default=1)

    shown = list(range(len(columns)))
    while sum(needs(i) + 3 for i in shown) + 1 > width:
        optional = [i for i in shown if columns[i].optional]
        if not optional:
            break
        shown.remove(max(optional, key=lambda i: columns[i].optional))

    # An identifier wider than the terminal (a long location) folds over lines, still whole.
    def reserve(i: int) -> int:
        return needs(i) if columns[i].identifier else min(needs(i), 4)

    whole = {
        i: min(needs(i), max(8, width - 1 - 3 * len(shown) - sum(reserve(o) for o in shown if o != i)))
        for i in shown
        if columns[i].identifier
    }
    others = [i for i in shown if i not in whole]
    room = width - 1 - sum(w + 3 for w in whole.values()) - 3 * len(others)
    widths = _share(room, [needs(i) for i in others], [_longest(columns[i].name, rows, i) for i in others])
    allotted = {**whole, **dict(zip(others, widths, strict=True))}
    table = Table(title=title)
    for i in shown:
        column = columns[i]
        table.add_column(
            column.name,
            justify=column.justify,
            overflow="fold",
            no_wrap=i in whole and whole[i] == needs(i),
            min_width=whole.get(i),
            max_width=allotted[i],
        )
    for row in rows:
        # Plain text: Rich markup in a cell is not interpreted (`[link=…]` would make a link).
        table.add_row(*[Text(row[i]) for i in shown])
    return table


# C0 and C1 control characters and DEL: a name holding ESC could drive the terminal (OSC 52 writes the
# clipboard, OSC 8 makes links).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(value: str) -> str:
    """`value` with its control characters as escapes (`\x1b`): a tenant's name cannot drive the
    terminal it is printed on."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], value)


def _longest(name: str, rows: Sequence[Sequence[str]], i: int) -> int:
    return max([len(name), *(len(row[i]) for row in rows)])


def _share(room: int, least: list[int], most: list[int]) -> list[int]:
    """Widths for columns that need `least` (their longest word) and want `most` (their longest text)
    within `room`: each gets its least, the rest is shared out evenly up to what each wants; when even
    the least does not fit, an even share (words then fold)."""
    if not least:
        return []
    if sum(least) > room:
        return [max(1, min(m, room // len(least))) for m in most]
    widths = list(least)
    spare = room - sum(widths)
    wanting = [i for i in range(len(widths)) if widths[i] < most[i]]
    while spare > 0 and wanting:
        each = max(1, spare // len(wanting))
        for i in list(wanting):
            grant = min(each, most[i] - widths[i], spare)
            widths[i] += grant
            spare -= grant
            if widths[i] >= most[i]:
                wanting.remove(i)
            if spare == 0:
                break
    return widths


def cell(value: Any) -> str:
    """A value as a table shows it: timestamps to the second, an absent value empty."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S}"
    return str(value)


def emit(
    output: str, payload: Any, rows: Sequence[Any], columns: list[str], *, optional: Sequence[str] = ()
) -> None:
    """`payload` as JSON, or `rows` as a table of `columns` on stdout (an absent value is an empty cell).

    At any width the identifier columns (IDENTIFIERS) are whole; `optional` columns, least important
    first, are left out when the terminal is too narrow for every column (see `fitted_table`)."""
    if output == "json":
        click.echo(json.dumps(as_json(payload), indent=2, default=str))
        return
    specs = [
        Column(
            c,
            identifier=c in IDENTIFIERS,
            optional=len(optional) - optional.index(c) if c in optional else 0,
        )
        for c in columns
    ]
    values = msgspec.to_builtins(list(rows), builtin_types=(datetime,))
    cells = [[cell(row.get(c)) for c in columns] for row in values]
    Console().print(fitted_table(specs, cells))
