"""floe's log handler writes a loop iteration's lines together, and the access log's direct lines are
the lines its records would have been."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from catalog import observability
from catalog.observability import ACCESS_LOGGER, AccessLog, JsonFormatter, JsonLinesHandler


@pytest.fixture
def access_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger(ACCESS_LOGGER)
    saved = (logger.handlers[:], logger.propagate, logger.level)
    logger.handlers.clear()
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        yield logger
    finally:
        logger.handlers[:], logger.propagate, logger.level = saved[0], saved[1], saved[2]


def _handler(stream: io.StringIO) -> JsonLinesHandler:
    handler = JsonLinesHandler(stream)
    handler.setFormatter(JsonFormatter())
    return handler


def test_lines_of_a_loop_iteration_are_written_together() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("floe.test.lines")
    logger.propagate = False
    logger.addHandler(_handler(stream))
    logger.setLevel(logging.INFO)

    async def run() -> None:
        logger.info("one")
        logger.info("two")
        assert stream.getvalue() == ""  # kept until the iteration ends
        await asyncio.sleep(0)
        assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()] == ["one", "two"]
        logger.info("three")
        logger.warning("four")  # at once, with what came before it
        assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()][2:] == ["three", "four"]

    asyncio.run(run())
    logger.info("off the loop")  # no loop: at once
    assert json.loads(stream.getvalue().splitlines()[-1])["msg"] == "off the loop"


def test_a_closed_loop_leaves_nothing_behind() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("floe.test.closed")
    logger.propagate = False
    handler = _handler(stream)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    loop = asyncio.new_event_loop()

    async def log_only() -> None:
        logger.info("kept")

    loop.run_until_complete(log_only())  # the flush callback may not run before close
    loop.close()
    handler.flush()  # logging's exit hook
    assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()] == ["kept"]

    async def later() -> None:
        logger.info("next loop")
        await asyncio.sleep(0)

    asyncio.run(later())  # a new loop schedules its own flush
    assert json.loads(stream.getvalue().splitlines()[-1])["msg"] == "next loop"


def test_direct_access_lines_match_formatted_records(access_logger: logging.Logger) -> None:
    stream = io.StringIO()
    access_logger.addHandler(_handler(stream))
    AccessLog().write("GET", "/v1/{prefix:str}/namespaces", 200, 1.25)
    extra = {"method": "GET", "path": "/v1/{prefix:str}/namespaces", "status": 200, "duration_ms": 1.25}
    access_logger.info("%s %s %d", "GET", "/v1/{prefix:str}/namespaces", 200, extra=extra)
    direct, formatted = (json.loads(line) for line in stream.getvalue().splitlines())
    assert direct.pop("ts")[:19] == formatted.pop("ts")[:19]
    assert direct == formatted
    assert direct["logger"] == ACCESS_LOGGER
    assert direct["msg"] == "GET /v1/{prefix:str}/namespaces 200"


def test_other_handlers_get_ordinary_records(access_logger: logging.Logger) -> None:
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    access_logger.addHandler(Collect())
    AccessLog().write("POST", "/v1/oauth/tokens", 401, 0.5)
    assert [(r.getMessage(), r.status, r.duration_ms) for r in records] == [  # type: ignore[attr-defined]
        ("POST /v1/oauth/tokens 401", 401, 0.5)
    ]
    access_logger.setLevel(logging.WARNING)
    AccessLog().write("POST", "/v1/oauth/tokens", 200, 0.5)
    assert len(records) == 1


def test_request_metrics_equal_one_observation_per_request() -> None:
    """Counts and latencies written together per loop iteration are what per-request writes give."""
    registry = CollectorRegistry()
    buckets = (0.001, 0.01, 0.1, 1.0)
    counter = Counter("t_requests", "", ["method", "route", "status"], registry=registry)
    batched = Histogram("t_batched", "", ["method", "route"], buckets=buckets, registry=registry)
    direct = Histogram("t_direct", "", ["method", "route"], buckets=buckets, registry=registry)
    latencies = [0.0005, 0.001, 0.002, 0.05, 0.05, 0.5, 3.0]
    saved = observability.REQUESTS, observability.LATENCY
    observability.REQUESTS, observability.LATENCY = counter, batched
    try:
        metrics = observability.RequestMetrics()

        async def run() -> None:
            for seconds in latencies:
                metrics.record("GET", "/r", 200, seconds)
                direct.labels("GET", "/r").observe(seconds)
            assert (
                registry.get_sample_value(
                    "t_requests_total", {"method": "GET", "route": "/r", "status": "200"}
                )
                is None
            )
            await asyncio.sleep(0)

        asyncio.run(run())
    finally:
        observability.REQUESTS, observability.LATENCY = saved
    labels = {"method": "GET", "route": "/r"}
    assert registry.get_sample_value("t_requests_total", {**labels, "status": "200"}) == len(latencies)
    for bound in ("0.001", "0.01", "0.1", "1.0", "+Inf"):
        expected = registry.get_sample_value("t_direct_bucket", {**labels, "le": bound})
        assert registry.get_sample_value("t_batched_bucket", {**labels, "le": bound}) == expected
    assert registry.get_sample_value("t_batched_sum", labels) == registry.get_sample_value(
        "t_direct_sum", labels
    )
