"""The command line's tables print tenants' names (tables, key descriptions, audit targets) as plain text:
no Rich markup in them is interpreted and no control character reaches the terminal, so a name cannot
write the clipboard (OSC 52), make a link (OSC 8) or rewrite what the operator sees."""

from __future__ import annotations

import io
import re

from rich.console import Console

from floe.cli.output import Column, fitted_table, printable

HOSTILE = [
    "orders\x1b]52;c;ZWNobyBwd25lZA==\x1b\\",  # OSC 52: sets the clipboard to "echo pwned"
    "\x1b]8;;https://attacker.example\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 link
    "[link=https://attacker.example]click[/link]",  # Rich markup making the same link
    "[/]unbalanced [bold]markup",
    "erase\x1b[2K\rfake line\x9b31m",
    "bell\x07 del\x7f nul\x00",
]


def rendered(rows: list[list[str]]) -> str:
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=300, color_system="standard").print(
        fitted_table([Column("name", identifier=True), Column("description")], rows, width=300)
    )
    return out.getvalue()


def test_hostile_names_print_as_plain_text() -> None:
    text = rendered([[name, name] for name in HOSTILE])
    # Only Rich's own colour sequences (CSI … m) reach the terminal: no OSC, no cursor or line control.
    assert re.findall(r"\x1b[^\[]", text) == []
    assert set(re.findall(r"\x1b\[[0-9;]*([A-Za-z])", text)) <= {"m"}
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", re.sub(r"\x1b\[[0-9;]*m", "", text))
    assert "[link=https://attacker.example]click[/link]" in text
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x1b\\" in text


def test_printable_keeps_ordinary_names() -> None:
    assert printable("orders_v1.événements 表") == "orders_v1.événements 表"
    assert printable("a\x1bb\tc") == "a\\x1bb\\tc"
