"""The access log writes its lines directly only where logging would have written the same: for every
configuration below, `AccessLog.write` gives the output its record, logged as any record, gives."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from catalog.observability import ACCESS_LOGGER, AccessLog, JsonFormatter, JsonLinesHandler

REQUEST = ("GET", "/v1/{prefix:str}/namespaces/{namespace:str}/tables/{table:str}", 200, 0.75)


class Shouting(JsonLinesHandler):
    """A subclass with its own `emit`: must be given records."""

    def emit(self, record: logging.LogRecord) -> None:
        record.msg = "shouted: " + str(record.msg)
        super().emit(record)


class Plain(JsonLinesHandler):
    """A subclass that changes nothing on the record path: may be given lines directly."""


@pytest.fixture
def loggers() -> Iterator[tuple[logging.Logger, logging.Logger]]:
    """The access logger (not propagating) and the root logger, restored afterwards. pytest adds its
    capturing handlers when the test runs: each test sets the handlers it means itself."""
    access, root = logging.getLogger(ACCESS_LOGGER), logging.getLogger()
    saved = [
        (logger, logger.handlers[:], logger.filters[:], logger.propagate, logger.level)
        for logger in (access, root)
    ]
    for logger in (access, root):
        logger.handlers.clear()
        logger.filters.clear()
        logger.propagate = logger is root
        logger.setLevel(logging.INFO)
    try:
        yield access, root
    finally:
        for logger, handlers, filters, propagate, level in saved:
            logger.handlers[:], logger.filters[:] = handlers, filters
            logger.propagate, logger.level = propagate, level


def _json_handler(stream: io.StringIO, kind: type[JsonLinesHandler] = JsonLinesHandler) -> JsonLinesHandler:
    handler = kind(stream)
    handler.setFormatter(JsonFormatter())
    return handler


def _without_time(text: str) -> list[Any]:
    lines: list[Any] = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            lines.append(line)
            continue
        entry.pop("ts")
        lines.append(entry)
    return lines


Lines = list[list[Any]]


def _emptied(*streams: io.StringIO) -> None:
    for stream in streams:
        stream.seek(0)
        stream.truncate()


def _direct_and_logged(streams: list[io.StringIO], flush: Callable[[], None]) -> tuple[Lines, Lines]:
    """What `AccessLog.write` writes to each stream, then what the same request's record does."""
    method, path, status, duration_ms = REQUEST
    _emptied(*streams)
    AccessLog().write(method, path, status, duration_ms)
    flush()
    direct = [_without_time(stream.getvalue()) for stream in streams]
    _emptied(*streams)
    extra = {"method": method, "path": path, "status": status, "duration_ms": duration_ms}
    logging.getLogger(ACCESS_LOGGER).info("%s %s %d", method, path, status, extra=extra)
    flush()
    logged = [_without_time(stream.getvalue()) for stream in streams]
    return direct, logged


def _flush_all(*handlers: logging.Handler) -> Callable[[], None]:
    def flush() -> None:
        for handler in handlers:
            handler.flush()

    return flush


def _direct_handlers() -> list[JsonLinesHandler] | None:
    """The handlers `AccessLog` hands lines to directly (None: it logs a record)."""
    return AccessLog()._json_lines_handlers()


def test_floe_handler_takes_lines_directly(loggers: tuple[logging.Logger, logging.Logger]) -> None:
    access, _ = loggers
    stream = io.StringIO()
    handler = _json_handler(stream)
    access.handlers[:] = [handler]
    assert _direct_handlers() == [handler]
    direct, logged = _direct_and_logged([stream], _flush_all(handler))
    assert direct == logged
    assert len(direct[0]) == 1


def test_a_subclass_that_changes_nothing_takes_lines_directly(
    loggers: tuple[logging.Logger, logging.Logger],
) -> None:
    access, _ = loggers
    stream = io.StringIO()
    handler = _json_handler(stream, Plain)
    access.handlers[:] = [handler]
    assert _direct_handlers() == [handler]
    direct, logged = _direct_and_logged([stream], _flush_all(handler))
    assert direct == logged


def test_a_subclass_with_its_own_emit_gets_records(loggers: tuple[logging.Logger, logging.Logger]) -> None:
    access, _ = loggers
    stream = io.StringIO()
    handler = _json_handler(stream, Shouting)
    access.handlers[:] = [handler]
    assert _direct_handlers() is None
    direct, logged = _direct_and_logged([stream], _flush_all(handler))
    assert direct == logged
    assert direct[0][0]["msg"] == f"shouted: GET {REQUEST[1]} 200"


def test_another_formatter_gets_records(loggers: tuple[logging.Logger, logging.Logger]) -> None:
    access, _ = loggers
    stream = io.StringIO()
    handler = JsonLinesHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s %(duration_ms)s"))
    access.handlers[:] = [handler]
    assert _direct_handlers() is None
    direct, logged = _direct_and_logged([stream], _flush_all(handler))
    assert direct == logged == [[f"{ACCESS_LOGGER} GET {REQUEST[1]} 200 0.75"]]


def test_filters_on_the_handler_or_the_logger_see_records(
    loggers: tuple[logging.Logger, logging.Logger],
) -> None:
    access, _ = loggers
    stream = io.StringIO()
    handler = _json_handler(stream)
    access.handlers[:] = [handler]
    handler.addFilter(lambda record: False)
    assert _direct_handlers() is None
    assert _direct_and_logged([stream], _flush_all(handler)) == ([[]], [[]])
    handler.filters.clear()
    access.addFilter(lambda record: False)
    assert _direct_handlers() is None
    assert _direct_and_logged([stream], _flush_all(handler)) == ([[]], [[]])


def test_levels_and_propagation_pick_the_same_handlers(
    loggers: tuple[logging.Logger, logging.Logger],
) -> None:
    access, root = loggers
    quiet, loud = io.StringIO(), io.StringIO()
    warnings_only = _json_handler(quiet)
    warnings_only.setLevel(logging.WARNING)
    everything = _json_handler(loud)
    access.handlers[:] = [warnings_only]
    access.propagate = True
    root.handlers[:] = [everything]
    assert _direct_handlers() == [everything]
    flush = _flush_all(warnings_only, everything)
    direct, logged = _direct_and_logged([quiet, loud], flush)
    assert direct == logged
    assert [len(lines) for lines in direct] == [0, 1]
    access.propagate = False  # no handler at INFO: logging writes nothing (its last resort is for none)
    assert _direct_handlers() is None
    direct, logged = _direct_and_logged([quiet, loud], flush)
    assert direct == logged == [[], []]
