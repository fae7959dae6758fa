"""The catalog served by uvicorn in a thread of the test process: the API tier's `floe serve`.

`CatalogThread` is a `CatalogProcess` (same constructor, URL, tokens, pyiceberg client, home and log)
whose `start` serves `catalog.api.app.create_app(settings)` on a loopback port from a thread instead of
starting a subprocess, so a test pays milliseconds rather than an interpreter start-up per server.
It runs the same app, on the same uvicorn protocol with floe's connection limits, against the same kind
of database; what it cannot show (kill -9, several worker processes, a process's memory, AWS keys that
libraries read from the process environment) stays in tests that start real `floe serve` processes
(tests/e2e, the S3 parameter of tests/api/test_confinement.py, tests/api/test_server_limits.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from catalog.api.app import create_app
from catalog.http_limits import LimitedHttpToolsProtocol
from catalog.observability import JsonFormatter
from catalog.settings import Settings
from devtools.catalog_server import CatalogProcess

# The loggers the catalog writes to (`floe.access` and the `catalog.*` modules): INFO, as `floe serve`.
_CATALOG_LOGGERS = ("floe", "catalog")
_THREAD_PREFIX = "floe-serve-"


class _ThreadLog(logging.Handler):
    """Appends, as `floe serve` logs them (JSON lines), what one in-process server logs.

    That is every record of its event loop's thread, and the catalog's records from worker threads
    (storage calls, `to_thread`) unless another server's loop logged them: a superset of the server's
    own log when several servers share the process, never less.
    """

    def __init__(self, path: Path, thread_name: str) -> None:
        super().__init__(logging.INFO)
        self.path = path
        self.thread_name = thread_name
        self.setFormatter(JsonFormatter())
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        thread = record.threadName or ""
        if thread != self.thread_name and (
            thread.startswith(_THREAD_PREFIX) or record.name.split(".")[0] not in _CATALOG_LOGGERS
        ):
            return
        line = self.format(record)
        with self._lock, self.path.open("a", encoding="utf-8") as log:
            log.write(line + "\n")


class CatalogThread(CatalogProcess):
    """`floe serve`'s app and uvicorn protocol in a thread of this process; stopped on exit."""

    def __init__(self, database_url: str | None = None, **options: Any) -> None:
        super().__init__(database_url, **options)
        if self.workers != 1:
            raise ValueError("several workers need processes: use CatalogProcess")
        # Only floe's own settings can differ per server in one process: libraries read the rest (such
        # as AWS_ACCESS_KEY_ID for boto3 and pyarrow) from the process's environment.
        foreign = sorted(name for name in self.extra_env if not name.startswith("FLOE_"))
        if foreign:
            raise ValueError(f"{', '.join(foreign)} would not reach an in-process server: use CatalogProcess")
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._log: _ThreadLog | None = None

    def settings(self) -> Settings:
        """What `floe serve` reads from its environment: this process's, with the server's on top."""
        env = {
            **os.environ,
            "FLOE_HOME": str(self.home),
            "FLOE_ADMIN_CLIENT_ID": self.admin_client_id,
            "FLOE_ADMIN_CLIENT_SECRET": self.admin_client_secret,
            **self.extra_env,
        }
        if self.database_url:
            env["FLOE_DATABASE_URL"] = self.database_url
        return Settings.from_env(env)

    def start(self, timeout: float = 60) -> CatalogThread:
        settings = self.settings()
        self.home.mkdir(parents=True, exist_ok=True)
        thread_name = f"{_THREAD_PREFIX}{self.port}"
        self._log = _ThreadLog(self.log_path, thread_name)
        logging.getLogger().addHandler(self._log)
        for name in _CATALOG_LOGGERS:
            logging.getLogger(name).setLevel(logging.INFO)
        config = uvicorn.Config(
            create_app(settings),
            host="127.0.0.1",
            port=self.port,
            loop="asyncio",
            lifespan="on",
            log_config=None,
            access_log=False,
            proxy_headers=False,
            timeout_keep_alive=settings.keep_alive_seconds,
            http=LimitedHttpToolsProtocol,
            backlog=min(2048, settings.max_connections),
        )
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, name=thread_name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"floe serve (in-process) did not start: {self.log_text()[-3000:]}")
            time.sleep(0.02)
        if httpx.get(f"{self.url}/readyz", timeout=10).status_code != 200:
            self.stop()
            raise RuntimeError(f"floe serve (in-process) is not ready: {self.log_text()[-3000:]}")
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=30)
        if self._log is not None:
            logging.getLogger().removeHandler(self._log)
        self._server = self._thread = self._log = None
