"""Prometheus metrics and structured (JSON) logs with request ids."""

from __future__ import annotations

import logging
import logging.config
import os
import time
from contextvars import ContextVar
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess

REQUEST_ID: ContextVar[str] = ContextVar("request_id", default="-")

REQUESTS = Counter("floe_http_requests_total", "HTTP requests", ["method", "route", "status"])
LATENCY = Histogram(
    "floe_http_request_duration_seconds",
    "HTTP request latency",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
COMMIT_RETRIES = Counter("floe_commit_retries_total", "Commits retried on a new base after losing a race")
COMMIT_CONFLICTS = Counter("floe_commit_conflicts_total", "Commits that failed after exhausting retries")


def metrics_payload() -> bytes:
    """The exposition text; aggregates all worker processes when running multi-process."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest()


class JsonFormatter(logging.Formatter):
    """One JSON object per line. Every request is logged (the access log), so this is lean: the
    timestamp's seconds are formatted once per second, and msgspec writes the JSON."""

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._stamp = ""

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:  # handlers call this under their lock
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        entry: dict[str, Any] = {
            "ts": f"{self._stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "request_id": REQUEST_ID.get(),
        }
        for key in ("method", "path", "status", "duration_ms"):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return msgspec.json.encode(entry).decode()


QUIET_LOGGERS = ("uvicorn.access", "aiosqlite", "asyncio")


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """JSON lines on stderr, as a `logging.config.dictConfig` dictionary: uvicorn applies it in each
    worker process it starts (they do not inherit the parent's handlers)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {
            "stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
        },
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {name: {"level": "WARNING"} for name in QUIET_LOGGERS},
    }


def configure_logging(level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(level))
