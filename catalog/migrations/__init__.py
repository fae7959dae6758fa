"""Alembic migrations of the catalog database, applied on start and by `floe db upgrade`."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    return config


def upgrade_database(database_url: str, revision: str = "head") -> None:
    """Bring the database schema to `revision` (blocking; call from a thread inside an event loop)."""
    command.upgrade(alembic_config(database_url), revision)
