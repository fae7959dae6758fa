"""The server's own log lines (uvicorn's start-up and shutdown) are written at once, with the lines kept
before them: uvicorn logs its last lines in the loop's last iteration and then re-raises SIGTERM, so an
end-of-iteration flush would never run (issue 30, item 7; a real process:
tests/e2e/test_shutdown_logs.py)."""

from __future__ import annotations

import asyncio
import io
import json
import logging

from catalog.observability import JsonFormatter, JsonLinesHandler


def test_uvicorn_lines_are_written_at_once_with_what_came_before() -> None:
    stream = io.StringIO()
    handler = JsonLinesHandler(stream)
    handler.setFormatter(JsonFormatter())
    app_logger, server_logger = logging.getLogger("floe.test.before"), logging.getLogger("uvicorn.test")
    for logger in (app_logger, server_logger):
        logger.propagate = False
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)

    async def run() -> None:
        app_logger.info("closing")
        assert stream.getvalue() == ""  # an application line waits for the iteration's end
        server_logger.info("Application shutdown complete.")
        # No await: the process could die right here.
        assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()] == [
            "closing",
            "Application shutdown complete.",
        ]

    try:
        asyncio.run(run())
    finally:
        for logger in (app_logger, server_logger):
            logger.removeHandler(handler)
