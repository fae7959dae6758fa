"""SIGTERM does not lose a stopping `floe serve`'s last log lines (issue 30, item 7).

floe's log handler writes a loop iteration's lines together at the iteration's end; uvicorn logs its
last lines in the loop's last iteration and then re-raises SIGTERM, so the process died with them
still buffered: "Application shutdown complete." never reached the log.
"""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path

import httpx

from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

LAST_LINES = ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete.")


def _terminate(server: CatalogProcess) -> int:
    """SIGTERM the server and wait for it: its exit status."""
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    status = server.process.wait(timeout=30)
    server.process = None
    return status


def _messages(server: CatalogProcess) -> list[dict[str, object]]:
    return [json.loads(line) for line in server.log_text().splitlines() if line.startswith("{")]


def test_sigterm_writes_the_last_log_lines(tmp_path: Path) -> None:
    server = CatalogProcess(home=tmp_path).start()
    try:
        assert server.process is not None
        pid = server.process.pid
        token = server.token()
        answer = httpx.get(f"{server.url}/v1/config", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200
        # uvicorn re-raises the signal once shut down: the process dies by it.
        assert _terminate(server) == -signal.SIGTERM
    finally:
        server.stop()
    entries = _messages(server)
    messages = [entry["msg"] for entry in entries]
    # The lines of the shutdown, in order, and the server's very last line at the end of the log.
    tail = [message for message in messages if message in LAST_LINES]
    assert tail == list(LAST_LINES), messages[-8:]
    assert messages[-1] == f"Finished server process [{pid}]", messages[-8:]
    # The access line of the request before the signal is there too.
    assert any(entry["logger"] == "floe.access" and entry.get("path") == "/v1/config" for entry in entries)


def test_sigterm_writes_every_workers_last_log_lines(postgres: LocalPostgres, tmp_path: Path) -> None:
    database = postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")
    server = CatalogProcess(database, home=tmp_path, workers=2).start()
    try:
        assert httpx.get(f"{server.url}/healthz").status_code == 200
        _terminate(server)
    finally:
        server.stop()
    messages = [entry["msg"] for entry in _messages(server)]
    # Each worker process stops its own server and logs its shutdown.
    assert messages.count("Application shutdown complete.") == 2, messages[-16:]
    assert sum(1 for message in messages if str(message).startswith("Finished server process")) == 2
