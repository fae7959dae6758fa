"""`floe db`: the catalog database's schema."""

from __future__ import annotations

import click

from catalog.migrations import upgrade_database
from floe.cli.errors import database_errors
from floe.cli.output import console
from floe.cli.settings import server_settings


@click.group()
def db() -> None:
    """Database schema management."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply all migrations to the configured database (FLOE_DATABASE_URL)."""
    settings = server_settings()
    settings.prepare_home()
    with database_errors(settings.database_url):
        upgrade_database(settings.database_url)
    console.print("database is at the latest revision")
