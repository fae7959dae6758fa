"""`floe openapi`: floe's OpenAPI document, generated from the code."""

from __future__ import annotations

import sys

import click


@click.command("openapi")
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False), default="-", help="File to write (default stdout)."
)
def openapi(output: str) -> None:
    """Print floe's OpenAPI document (generated from the code)."""
    from catalog.api.openapi import render_openapi

    text = render_openapi()
    if output == "-":
        sys.stdout.write(text)
    else:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
