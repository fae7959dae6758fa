"""Prometheus metrics and structured (JSON) logs with request ids."""

from __future__ import annotations

import asyncio
import logging
import logging.config
import os
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess

from catalog.prometheus_batch import observe_all

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
COMMIT_HEAD_GUESSES = Counter(
    "floe_commit_head_guesses_total",
    "Commits prepared on the table row this process's last commit left, without reading it, by whether "
    "that row was still current (stale: another process committed to the table in between)",
    ["result"],
)


class IterationEnd:
    """Calls `flush` once at the end of the running event-loop iteration, however often it is asked in
    that iteration (what request metrics and log lines are gathered by)."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        # The loop whose iteration end will flush (None: nothing scheduled). A loop that closed before
        # running its callback leaves its name here; the next loop schedules anew.
        self._scheduled_on: asyncio.AbstractEventLoop | None = None

    def schedule(self) -> bool:
        """Schedule the flush; False off a loop (then the caller flushes at once)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if self._scheduled_on is not loop:
            loop.call_soon(self._run)
            self._scheduled_on = loop
        return True

    def _run(self) -> None:
        self._scheduled_on = None
        self._flush()


# (method, route template, status): routes are templates, so the set is small, but unmatched methods
# could vary: bounded all the same.
MAX_METRIC_CHILDREN = 4096


class RequestMetrics:
    """Requests counted (`REQUESTS`) and timed (`LATENCY`), written once per event-loop iteration.

    With several workers every count and observation is a locked write to a memory-mapped file, three
    per request; a loaded loop answers several requests per iteration, and their counts and latencies
    go in one write per route and status, bucket and sum. Off a loop (or in a loop's last iteration)
    they are written at once, before anything reads them: `/metrics` is answered in a later iteration.
    """

    def __init__(self) -> None:
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self._pending: dict[tuple[str, str, int], list[float]] = {}
        self._iteration_end = IterationEnd(self.flush)

    def record(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        latencies = self._pending.get(key)
        if latencies is None:
            self._pending[key] = [seconds]
        else:
            latencies.append(seconds)
        if not self._iteration_end.schedule():
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, {}
        for key, latencies in pending.items():
            children = self._children.get(key)
            if children is None:  # `labels()` validates and locks on every call: keep the children
                method, route, status = key
                children = (REQUESTS.labels(method, route, str(status)), LATENCY.labels(method, route))
                if len(self._children) < MAX_METRIC_CHILDREN:
                    self._children[key] = children
            children[0].inc(len(latencies))
            observe_all(children[1], latencies)


def metrics_payload() -> bytes:
    """The exposition text; aggregates all worker processes when running multi-process."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest()


ACCESS_LOGGER = "floe.access"
# The access log's fields beside the message.
ACCESS_FIELDS = ("method", "path", "status", "duration_ms")


class JsonFormatter(logging.Formatter):
    """One JSON object per line. Every request is logged (the access log), so this is lean: the
    timestamp's seconds are formatted once per second, and msgspec writes the JSON."""

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._stamp = ""

    def _timestamp(self, created: float) -> str:
        second = int(created)
        if second != self._second:  # handlers call this under their lock
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int((created - second) * 1000):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self._timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "request_id": REQUEST_ID.get(),
        }
        for key in ACCESS_FIELDS:
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return msgspec.json.encode(entry).decode()

    def access_line(self, created: float, method: str, path: str, status: int, duration_ms: float) -> str:
        """The line `format` writes for the access log's record of a request, built without one."""
        entry = {
            "ts": self._timestamp(created),
            "level": "info",
            "logger": ACCESS_LOGGER,
            "msg": f"{method} {path} {status}",
            "request_id": REQUEST_ID.get(),
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": duration_ms,
        }
        return msgspec.json.encode(entry).decode()


class JsonLinesHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that writes the lines of one event-loop iteration together.

    Every request writes an access line; one write (a system call) per line cost a loaded catalog more
    than a third of a loadTable's CPU. Lines logged on a thread running an event loop are kept until
    that iteration ends (`call_soon`), then written at once; a line of WARNING or above, a line of the
    server's own (`uvicorn` loggers: start-up, shutdown), one logged off the loop, and a full buffer are
    written at once, with everything before them, so nothing waits longer than the iteration it was
    logged in and order is kept. `flush` and `close` (logging's exit hook) write what is kept.

    The server's lines are written at once because its last ones ("Application shutdown complete.",
    "Finished server process") are logged in the loop's last iteration, after which uvicorn re-raises
    SIGTERM or SIGINT and the process dies by the signal: no later iteration, no exit hook.
    """

    MAX_BUFFERED = 512
    # Loggers whose lines are written at once: rare, and the last ones a process writes.
    UNBUFFERED_LOGGERS = ("uvicorn",)

    def __init__(self, stream: Any = None) -> None:
        super().__init__(stream)
        self._lines: list[str] = []
        self._iteration_end = IterationEnd(self.flush)

    def emit(self, record: logging.LogRecord) -> None:
        # Called under the handler's lock (`Handler.handle`).
        try:
            urgent = record.levelno >= logging.WARNING or record.name.startswith(self.UNBUFFERED_LOGGERS)
            self._keep(self.format(record), urgent=urgent)
        except Exception:
            self.handleError(record)

    def write_access(self, created: float, method: str, path: str, status: int, duration_ms: float) -> None:
        """Write an access line as `emit` would write its record (see `AccessLog`)."""
        formatter = self.formatter
        assert isinstance(formatter, JsonFormatter)
        self.acquire()
        try:
            self._keep(formatter.access_line(created, method, path, status, duration_ms), urgent=False)
        finally:
            self.release()

    def takes_access_lines(self) -> bool:
        """Whether `write_access` writes exactly the line `handle` would of the access log's record: no
        filter, a `JsonFormatter`, and logging's record path (`handle`, `filter`, `format`, `emit`) as this
        class has it. A subclass that changes any of them gets records (so does another formatter)."""
        own = type(self)
        return (
            not self.filters
            and type(self.formatter) is JsonFormatter
            and own.emit is JsonLinesHandler.emit
            and own.handle is logging.Handler.handle
            and own.filter is logging.Filterer.filter
            and own.format is logging.Handler.format
        )

    def _keep(self, line: str, *, urgent: bool) -> None:
        self._lines.append(line)
        if urgent or len(self._lines) >= self.MAX_BUFFERED or not self._iteration_end.schedule():
            self._write_lines()

    def _write_lines(self) -> None:
        if self._lines:
            text = "\n".join(self._lines) + "\n"
            self._lines.clear()
            self.stream.write(text)
        super().flush()

    def flush(self) -> None:
        self.acquire()
        try:
            if self.stream is not None and not getattr(self.stream, "closed", False):
                self._write_lines()
        finally:
            self.release()


class AccessLog:
    """The access log: a line per request on the `floe.access` logger.

    With floe's own logging (`logging_config`) every handler a record would reach is a `JsonLinesHandler`
    that `takes_access_lines`, and the line is handed to them directly: building a `LogRecord` and passing
    it through the logger cost several times more than the line itself. Any other configuration (another
    handler, a filter, a formatter) gets an ordinary record, as from any logger. Which handlers a record
    reaches is found as `logging.Logger.callHandlers` finds them (its documented attributes: `handlers`,
    `filters`, `propagate`, `parent`, a handler's `level`); tests/unit/test_access_log_routing.py checks each
    configuration gets the lines its records would give.
    """

    def __init__(self) -> None:
        self.logger = logging.getLogger(ACCESS_LOGGER)

    def write(self, method: str, path: str, status: int, duration_ms: float) -> None:
        logger = self.logger
        if not logger.isEnabledFor(logging.INFO):
            return
        handlers = self._json_lines_handlers()
        if handlers is None:
            extra = {"method": method, "path": path, "status": status, "duration_ms": duration_ms}
            logger.info("%s %s %d", method, path, status, extra=extra)
            return
        created = time.time()
        for handler in handlers:
            handler.write_access(created, method, path, status, duration_ms)

    def _json_lines_handlers(self) -> list[JsonLinesHandler] | None:
        """The handlers a record of the access log reaches, when all take it as `JsonLinesHandler`s with
        a `JsonFormatter` and no filter would look at it; otherwise None."""
        found: list[JsonLinesHandler] = []
        logger: logging.Logger | None = self.logger
        while logger is not None:
            if logger.filters:
                return None
            for handler in logger.handlers:
                if handler.level > logging.INFO:
                    continue
                if not (isinstance(handler, JsonLinesHandler) and handler.takes_access_lines()):
                    return None
                found.append(handler)
            logger = logger.parent if logger.propagate else None
        return found or None  # no handler at all: logging's last resort decides


QUIET_LOGGERS = ("uvicorn.access", "aiosqlite", "asyncio")


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """JSON lines on stderr, as a `logging.config.dictConfig` dictionary: uvicorn applies it in each
    worker process it starts (they do not inherit the parent's handlers)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {
            "stderr": {
                "class": "catalog.observability.JsonLinesHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {name: {"level": "WARNING"} for name in QUIET_LOGGERS},
    }


def configure_logging(level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(level))
