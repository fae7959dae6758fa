"""`floe serve`: the Iceberg REST catalog server."""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

import click

from catalog.listeners import reuseport_socket, reuseport_supported
from catalog.migrations import upgrade_database
from catalog.settings import Settings
from catalog.store import create_store
from floe.cli.errors import database_errors, port_option_error
from floe.cli.output import console
from floe.cli.settings import server_settings

WORKER_HEALTHCHECK_SECONDS = 30


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8181, show_default=True, type=int, help="Port to bind.")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=int,
    help="Worker processes (use PostgreSQL for more than one).",
)
@click.option("--log-level", default="info", show_default=True)
def serve(host: str, port: int, workers: int, log_level: str) -> None:
    """Run the Iceberg REST catalog server."""
    import uvicorn

    from catalog.http_limits import LimitedHttpToolsProtocol
    from catalog.observability import configure_logging, logging_config
    from devtools.ports import port_is_free

    settings = server_settings()
    settings.prepare_home()
    if workers > 1 and settings.database_url.startswith("sqlite"):
        raise click.UsageError("several workers need a shared database: set FLOE_DATABASE_URL to PostgreSQL")
    if not port_is_free(port, host):
        raise port_option_error(port, "--port", host)
    with database_errors(settings.database_url):
        upgrade_database(settings.database_url)
        # Bootstrap the admin key once here, before several workers could race to do it.
        asyncio.run(_bootstrap(settings))
    os.environ["FLOE_MIGRATE_ON_START"] = "false"
    if workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="floe-metrics-")
    configure_logging(log_level)
    console.print(
        f"[bold]floe[/bold] catalog on http://{host}:{port}  warehouse {settings.warehouse_location}  "
        f"database {settings.database_url.split('@')[-1]}",
        highlight=False,
    )
    options: dict[str, Any] = {
        # Applied again in every worker process, which starts with no handlers of its own.
        "log_config": logging_config(log_level),
        "access_log": False,
        "proxy_headers": False,
        # See Settings.keep_alive_seconds for why idle connections stay open this long.
        "timeout_keep_alive": settings.keep_alive_seconds,
        # httptools with header size, field count, header timeout and connection limits.
        "http": LimitedHttpToolsProtocol,
        # Room to queue connection bursts, within the per-process connection cap.
        "backlog": min(2048, settings.max_connections),
        # uvicorn kills a worker that does not answer its supervisor's ping within this many seconds
        # (default 5): on a busy host a starting worker (seconds of imports) missed it and was killed
        # and restarted over and over.
        "timeout_worker_healthcheck": WORKER_HEALTHCHECK_SECONDS,
    }
    if workers > 1 and reuseport_supported():
        from uvicorn.supervisors import Multiprocess

        # One listener per worker instead of a shared one: see catalog/listeners.py.
        config = uvicorn.Config(
            "catalog.api.app:create_app", factory=True, host=host, port=port, workers=workers, **options
        )
        Multiprocess(config, sockets=[reuseport_socket(host, port)]).run()
        return
    uvicorn.run("catalog.api.app:create_app", factory=True, host=host, port=port, workers=workers, **options)


async def _bootstrap(settings: Settings) -> None:
    from catalog.service.security import AuthService

    store = create_store(settings.database_url)
    try:
        await AuthService(store, settings).bootstrap_admin()
    finally:
        await store.close()
