"""Properties that name code for a client to load, which floe refuses from clients.

Iceberg clients build part of a table from classes its properties name: pyiceberg imports and calls the
`py-io-impl` of a loaded table (the table's properties are merged into its FileIO settings) and the
`write.py-location-provider.impl` of a table it writes; the Java client (Spark, floe's ingestion and
maintenance) instantiates the `write.location-provider.impl` of a table it writes. A tenant who could set
one would choose code that runs in every other client that reads or writes the table: floe's own
pipelines, other teams' notebooks. No property an engine needs ends in `impl`, so every such name is
refused, wherever properties come in (table, view and namespace properties; create, commit, register)."""

from __future__ import annotations

from collections.abc import Iterable

from catalog.errors import BadRequest

_SHOWN_CHARS = 80


def names_a_class(name: str) -> bool:
    """Whether the property `name` names a class for a client to load: `py-io-impl`, `io-impl`,
    `write.location-provider.impl`, `write.py-location-provider.impl` and any future `*-impl`/`*.impl`."""
    return name.strip().lower().endswith("impl")


def check_no_class_properties(names: Iterable[str], what: str) -> None:
    """`BadRequest` naming the first property in `names` that names a class for clients to load."""
    for name in names:
        if names_a_class(name):
            shown = name if len(name) <= _SHOWN_CHARS else name[:_SHOWN_CHARS] + "…"
            raise BadRequest(
                f"Invalid {what}: {shown!r} names a class for clients to load; floe does not accept "
                "properties that make readers and writers of a table run code chosen by its writer"
            )
