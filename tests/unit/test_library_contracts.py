"""What floe assumes of its libraries' internals, checked against the installed versions.

Each library whose internals floe uses has them in one module, is pinned in pyproject.toml to the versions
tested, and has its assumptions here, so an upgrade that breaks one fails a test instead of the server:

- uvicorn: `catalog/http_limits.py` subclasses `HttpToolsProtocol` (its parser callbacks and connection
  hooks) and carries a copy of its `data_received`.
  `floe serve --workers N` (floe/cli/serve.py) runs `uvicorn.supervisors.Multiprocess` with its own
  listening sockets.
- prometheus_client: `catalog/prometheus_batch.py` writes a histogram's `_upper_bounds`/`_buckets`/`_sum`.
- confluent_kafka: `devtools/kafka_broker.py` creates SCRAM users through the public names of
  `confluent_kafka.admin` (no internal left; checked so the public names stay what it uses).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from catalog.connection_limits import connection_limits
from catalog.http_limits import LimitedHttpToolsProtocol
from catalog.prometheus_batch import observe_all, uses_internals

ROOT = Path(__file__).resolve().parents[2]

# -- uvicorn -------------------------------------------------------------------------------------------

# uvicorn's `HttpToolsProtocol.data_received` as floe's `LimitedHttpToolsProtocol.data_received` copies it.
# When this fails after an upgrade: compare uvicorn's new method with this text, carry the change into
# catalog/http_limits.py, then record the new text here (and move the pin in pyproject.toml).
UVICORN_DATA_RECEIVED = """\
def data_received(self, data: bytes) -> None:
    self._unset_keepalive_if_required()

    try:
        self.parser.feed_data(data)
    except httptools.HttpParserError:
        msg = "Invalid HTTP request received."
        self.logger.warning(msg)
        self.send_400_response(msg)
        return
    except httptools.HttpParserUpgrade:
        if self._should_upgrade():
            self.handle_websocket_upgrade()
        else:
            self._unsupported_upgrade_warning()
"""

# uvicorn's methods floe overrides, with the parameters it calls them with: a renamed or re-signed one
# would silently stop being called (or be called wrongly).
UVICORN_OVERRIDDEN = {
    "connection_made": ["self", "transport"],
    "connection_lost": ["self", "exc"],
    "handle_websocket_upgrade": ["self"],
    "data_received": ["self", "data"],
    "send_400_response": ["self", "msg"],
    "on_url": ["self", "url"],
    "on_header": ["self", "name", "value"],
    "on_headers_complete": ["self"],
    "on_body": ["self", "body"],
    "on_message_complete": ["self"],
}
# uvicorn's helpers the copied `data_received` calls.
UVICORN_CALLED = ("_unset_keepalive_if_required", "_should_upgrade", "_unsupported_upgrade_warning")


def test_uvicorn_data_received_is_the_one_floe_copies() -> None:
    source = textwrap.dedent(inspect.getsource(HttpToolsProtocol.data_received))
    assert source == UVICORN_DATA_RECEIVED, (
        "uvicorn's HttpToolsProtocol.data_received changed: carry the change into "
        "catalog/http_limits.py's LimitedHttpToolsProtocol.data_received, then update this copy"
    )


@pytest.mark.parametrize(("name", "parameters"), sorted(UVICORN_OVERRIDDEN.items()))
def test_uvicorn_methods_floe_overrides_keep_their_signatures(name: str, parameters: list[str]) -> None:
    assert name in vars(HttpToolsProtocol), f"uvicorn's HttpToolsProtocol no longer defines {name}"
    assert list(inspect.signature(getattr(HttpToolsProtocol, name)).parameters) == parameters
    assert name in vars(LimitedHttpToolsProtocol)


def test_uvicorn_helpers_floe_calls_exist() -> None:
    for name in UVICORN_CALLED:
        assert callable(getattr(HttpToolsProtocol, name, None)), name
    init = list(inspect.signature(HttpToolsProtocol.__init__).parameters)
    assert init[:4] == ["self", "config", "server_state", "app_state"]


def test_uvicorn_multiprocess_takes_the_sockets_floe_listens_on() -> None:
    from uvicorn.supervisors import Multiprocess

    assert list(inspect.signature(Multiprocess.__init__).parameters) == ["self", "config", "sockets"]
    assert callable(Multiprocess.run)


class _Transport:
    """An asyncio transport that keeps what is written (what uvicorn's protocol uses of one)."""

    def __init__(self) -> None:
        self.written = b""
        self.closed = False
        self.closed_by_server = False  # closed before the connection's end (uvicorn closes it then)
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8181)}.get(name, default)

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def set_protocol(self, protocol: Any) -> None:
        pass


async def _echo(scope: dict[str, Any], receive: Callable[[], Any], send: Callable[[Any], Any]) -> None:
    """Answers 200 with the request's body."""
    assert scope["type"] == "http"
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]}
    )
    await send({"type": "http.response.body", "body": body})


def _exchange(*chunks: bytes) -> _Transport:
    """Feed `chunks` to a `LimitedHttpToolsProtocol` connection; what it wrote back."""

    async def run() -> _Transport:
        config = Config(
            app=_echo, lifespan="off", http=LimitedHttpToolsProtocol, log_config=None, access_log=False
        )
        config.load()
        transport = _Transport()
        protocol = LimitedHttpToolsProtocol(
            config=config, server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop()
        )
        protocol.connection_made(transport)  # type: ignore[arg-type]
        for chunk in chunks:
            protocol.data_received(chunk)
            for _ in range(10):  # the application's steps and the coalesced write
                await asyncio.sleep(0)
        transport.closed_by_server = transport.closed
        protocol.connection_lost(None)
        return transport

    return asyncio.run(run())


def _status(written: bytes) -> int:
    return int(written.split(b" ", 2)[1])


def test_uvicorn_protocol_with_floe_limits_answers_requests_and_bodies() -> None:
    transport = _exchange(
        b"POST /echo HTTP/1.1\r\nHost: floe\r\nContent-Length: 5\r\n\r\nhel",
        b"lo",
        b"GET / HTTP/1.1\r\nHost: floe\r\n\r\n",
    )
    responses = transport.written.split(b"HTTP/1.1 ")[1:]
    assert [response.split(b" ", 1)[0] for response in responses] == [b"200", b"200"]
    assert responses[0].endswith(b"\r\n\r\nhello")
    assert not transport.closed_by_server


def test_uvicorn_protocol_with_floe_limits_refuses_heads_over_the_limits() -> None:
    limits = connection_limits()
    fields = b"".join(b"X-%d: a\r\n" % index for index in range(limits.max_headers + 1))
    too_many = _exchange(b"GET / HTTP/1.1\r\nHost: floe\r\n" + fields + b"\r\n")
    assert _status(too_many.written) == 431
    assert too_many.closed_by_server
    unfinished = _exchange(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * (limits.max_header_bytes + 1))
    assert _status(unfinished.written) == 431


def test_uvicorn_protocol_with_floe_limits_answers_a_malformed_request_in_error_json() -> None:
    transport = _exchange(b"GET /\x00 HTTP/1.1\r\n\r\n")
    assert _status(transport.written) == 400
    body = json.loads(transport.written.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == 400
    assert transport.closed_by_server


# -- prometheus_client ---------------------------------------------------------------------------------

BUCKETS = (0.001, 0.01, 0.1, 1.0)
# On the bounds, between them, under the first and over the last: every bucket and +Inf.
LATENCIES = [0.0005, 0.001, 0.002, 0.01, 0.05, 0.05, 0.1, 0.5, 1.0, 3.0]


def test_prometheus_histogram_children_have_the_internals_floe_writes() -> None:
    histogram = Histogram("contract_h", "", ["route"], buckets=BUCKETS, registry=CollectorRegistry())
    child = histogram.labels("/r")
    assert uses_internals(child)
    assert list(child._upper_bounds) == [*BUCKETS, float("inf")]
    assert len(child._buckets) == len(child._upper_bounds)
    assert all(callable(value.inc) for value in [*child._buckets, child._sum])


def _samples(registry: Any, name: str) -> dict[str, float]:
    return {
        f"{sample.name}{sorted(sample.labels.items())}": sample.value
        for family in registry.collect()
        if family.name == name
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def _renamed(samples: dict[str, float], old: str, new: str) -> dict[str, float]:
    return {key.replace(old, new): value for key, value in samples.items()}


def test_prometheus_batched_observations_equal_observe() -> None:
    registry = CollectorRegistry()
    batched = Histogram("contract_batched", "", ["route"], buckets=BUCKETS, registry=registry)
    direct = Histogram("contract_direct", "", ["route"], buckets=BUCKETS, registry=registry)
    observe_all(batched.labels("/r"), LATENCIES)
    for value in LATENCIES:
        direct.labels("/r").observe(value)
    expected = _renamed(_samples(registry, "contract_direct"), "contract_direct", "contract_batched")
    assert _samples(registry, "contract_batched") == expected
    assert expected  # buckets, count and sum were compared


MULTIPROCESS_PROGRAM = """
import json, sys
from prometheus_client import CollectorRegistry, Histogram, multiprocess
from catalog.prometheus_batch import observe_all, uses_internals

buckets, latencies = json.loads(sys.argv[1])
batched = Histogram("contract_batched", "", ["route"], buckets=buckets)
direct = Histogram("contract_direct", "", ["route"], buckets=buckets)
assert uses_internals(batched.labels("/r"))
observe_all(batched.labels("/r"), latencies)
for value in latencies:
    direct.labels("/r").observe(value)
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry)
samples = [sample for family in registry.collect() for sample in family.samples]
print(json.dumps([[sample.name, sorted(sample.labels.items()), sample.value] for sample in samples]))
"""


def test_prometheus_batched_observations_equal_observe_in_multiprocess_mode(tmp_path: Path) -> None:
    """With several workers the values are memory-mapped files read by `MultiProcessCollector`."""
    environment = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    output = subprocess.run(
        [sys.executable, "-c", MULTIPROCESS_PROGRAM, json.dumps([BUCKETS, LATENCIES])],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    samples: dict[str, dict[str, float]] = {"contract_batched": {}, "contract_direct": {}}
    for name, labels, value in json.loads(output):
        metric = "contract_batched" if name.startswith("contract_batched") else "contract_direct"
        samples[metric][f"{name.replace(metric, 'm')}{labels}"] = value
    assert samples["contract_batched"] == samples["contract_direct"]
    assert len(samples["contract_direct"]) == len(BUCKETS) + 3  # the buckets, +Inf, count and sum


# -- confluent_kafka -----------------------------------------------------------------------------------


def test_confluent_kafka_public_scram_names_are_what_the_broker_launcher_uses() -> None:
    import confluent_kafka.admin as admin

    from devtools import kafka_broker

    for name in ("ScramCredentialInfo", "ScramMechanism", "UserScramCredentialUpsertion", "NewTopic"):
        assert getattr(kafka_broker, name) is getattr(admin, name), name
    for method in ("alter_user_scram_credentials", "describe_user_scram_credentials", "create_topics"):
        assert callable(getattr(admin.AdminClient, method, None)), method
    upsertion = admin.UserScramCredentialUpsertion(
        "floe", admin.ScramCredentialInfo(admin.ScramMechanism.SCRAM_SHA_512, 8192), b"secret"
    )
    assert upsertion.user == "floe"
    assert upsertion.scram_credential_info.mechanism is admin.ScramMechanism.SCRAM_SHA_512
    assert upsertion.scram_credential_info.iterations == 8192
