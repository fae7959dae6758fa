"""Run a real `floe serve` process on loopback (tests and benchmarks talk to it over HTTP)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx

from devtools.ports import free_port
from devtools.processes import stop_process, wait_until_answering

if TYPE_CHECKING:
    from pyiceberg.catalog.rest import RestCatalog


class CatalogProcess:
    """`floe serve` in a subprocess with its own FLOE_HOME; stopped (and its home kept for logs) on exit."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        home: Path | None = None,
        workers: int = 1,
        env: dict[str, str] | None = None,
        port: int | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.home = home or Path(tempfile.mkdtemp(prefix="floe-home-"))
        self.port = port or free_port()
        self.workers = workers
        self.database_url = database_url
        self.extra_env = env or {}
        # A benchmark runs an earlier commit's exported tree from its folder (`python -m` imports from the
        # working folder first), with that folder on PYTHONPATH.
        self.cwd = cwd
        self.log_path = self.home / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        # The bootstrap admin key, set through the environment so tests and benchmarks know it.
        self.admin_client_id = self.extra_env.get("FLOE_ADMIN_CLIENT_ID", "floe-admin")
        self.admin_client_secret = self.extra_env.get("FLOE_ADMIN_CLIENT_SECRET", secrets.token_urlsafe(24))

    @property
    def admin_credential(self) -> str:
        """`client_id:client_secret`, the form pyiceberg's `credential` property takes."""
        return f"{self.admin_client_id}:{self.admin_client_secret}"

    def token(self, client_id: str | None = None, client_secret: str | None = None) -> str:
        """An access token for the given key (default: the admin key)."""
        response = httpx.post(
            f"{self.url}/v1/oauth/tokens",
            data={
                "grant_type": "client_credentials",
                "client_id": client_id or self.admin_client_id,
                "client_secret": client_secret or self.admin_client_secret,
            },
            timeout=30,
        )
        response.raise_for_status()
        return str(response.json()["access_token"])

    def catalog(self, credential: str | None = None, **properties: Any) -> RestCatalog:
        """A pyiceberg REST catalog client of this server, authenticated with `credential`."""
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog("floe", uri=self.url, credential=credential or self.admin_credential, **properties)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def warehouse_path(self) -> Path:
        return self.home / "warehouse"

    def start(self, timeout: float = 60) -> CatalogProcess:
        env = {
            **os.environ,
            "FLOE_HOME": str(self.home),
            "FLOE_ADMIN_CLIENT_ID": self.admin_client_id,
            "FLOE_ADMIN_CLIENT_SECRET": self.admin_client_secret,
            **self.extra_env,
        }
        if self.database_url:
            env["FLOE_DATABASE_URL"] = self.database_url
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "floe.cli",
                "serve",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
        )
        wait_until_answering(
            self.process, f"{self.url}/readyz", name="floe serve", timeout=timeout, log_text=self.log_text
        )
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> CatalogProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
