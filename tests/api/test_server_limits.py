"""`floe serve` bounds what an unauthenticated client can hold (issue 9, item 9): request head size and
field count (431), the time to send a request head, idle keep-alive connections, and open connections.
And (issue 29, item 3) the time to send a request body, by a rate, and open connections per client
address.

Before, a 60 MB header was answered 200 (8 concurrent 100 MB headers took the server from 379 MB to
1 GB) and 6,000 half-open connections stayed open for 20+ s; ~1,000 connections trickling a POST body a
byte every few seconds made every new request get 503 until they let go.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from devtools.catalog_server import CatalogProcess

LIMITS = {
    "FLOE_MAX_HEADER_BYTES": "16384",
    "FLOE_MAX_HEADERS": "50",
    "FLOE_HEADER_TIMEOUT_SECONDS": "2",
    "FLOE_KEEP_ALIVE_SECONDS": "3",
    "FLOE_MAX_CONNECTIONS": "40",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    with CatalogProcess(home=Path(tmp_path_factory.mktemp("limits")), env=LIMITS) as process:
        yield process


def connect(server: CatalogProcess, timeout: float = 10) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def exchange(server: CatalogProcess, request: bytes, timeout: float = 10) -> tuple[bytes, float]:
    """Send `request` and read until the server closes: (what it answered, seconds it took). A server that
    resets the connection while the request is still being sent answers b""."""
    started = time.monotonic()
    with connect(server, timeout) as sock:
        answer = b""
        try:
            sock.sendall(request)
            while chunk := sock.recv(65536):
                answer += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
    return answer, time.monotonic() - started


def rss_bytes(server: CatalogProcess) -> int:
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def request_with(headers: bytes) -> bytes:
    return b"GET /healthz HTTP/1.1\r\nHost: floe\r\n" + headers + b"Connection: close\r\n\r\n"


def test_request_within_limits_is_served(server: CatalogProcess) -> None:
    headers = b"".join(b"X-Field-%d: %s\r\n" % (i, b"v" * 200) for i in range(45))
    answer, _ = exchange(server, request_with(headers))
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_large_header_gets_431(server: CatalogProcess) -> None:
    answer, elapsed = exchange(server, request_with(b"X-Big: " + b"a" * 20_000 + b"\r\n"))
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b'"code":431' in answer
    assert elapsed < 2


def test_huge_headers_are_refused_quickly_and_memory_stays_bounded(server: CatalogProcess) -> None:
    before = rss_bytes(server)
    answers: list[tuple[bytes, float]] = []

    def attack() -> None:
        answers.append(
            exchange(server, b"GET /healthz HTTP/1.1\r\nHost: floe\r\nX-Big: " + b"a" * 100_000_000)
        )

    threads = [threading.Thread(target=attack) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == 8
    for answer, elapsed in answers:
        # Refused with a 431 or a reset while still sending: never read to the end.
        assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        assert elapsed < 10
    assert rss_bytes(server) - before < 50 * 1024 * 1024
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_too_many_headers_get_431(server: CatalogProcess) -> None:
    headers = b"".join(b"X-Field-%d: 1\r\n" % i for i in range(60))
    answer, _ = exchange(server, request_with(headers))
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"header fields" in answer


def test_silent_connection_is_closed_after_the_header_timeout(server: CatalogProcess) -> None:
    answer, elapsed = exchange(server, b"", timeout=20)
    assert answer == b""
    assert 1.5 < elapsed < 6


def test_slow_request_head_is_closed_after_the_header_timeout(server: CatalogProcess) -> None:
    """Slowloris: a byte now and then does not extend the deadline."""
    started = time.monotonic()
    with connect(server, timeout=20) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: floe\r\n")
        answer = b""
        try:
            for _ in range(20):
                time.sleep(0.5)
                sock.sendall(b"X: 1\r\n")
        except (ConnectionResetError, BrokenPipeError):
            pass
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    assert time.monotonic() - started < 6
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408 "), answer[:200]


def test_idle_keep_alive_connection_is_closed(server: CatalogProcess) -> None:
    with connect(server, timeout=20) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: floe\r\n\r\n")
        answer = b""
        while not answer.endswith(b"}"):  # the JSON body of /healthz
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
        started = time.monotonic()
        assert sock.recv(65536) == b""
        assert 2 < time.monotonic() - started < 8


def test_a_later_head_has_its_own_deadline(server: CatalogProcess) -> None:
    """The deadline of a kept-alive connection's next head runs from that head's first byte: not cut
    short by the connection's first deadline, not extended by it either."""
    with connect(server, timeout=20) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: floe\r\n\r\n")
        answer = b""
        while not answer.endswith(b"}"):
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
        time.sleep(1.5)  # the connection's first deadline (2 s) passes while the next head is read
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert 1.8 < elapsed < 4, elapsed


def test_keep_alive_connection_serves_many_requests(server: CatalogProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        for _ in range(50):
            assert client.get("/healthz").status_code == 200


def test_connections_beyond_the_limit_are_refused(server: CatalogProcess) -> None:
    held = [connect(server) for _ in range(60)]
    try:
        time.sleep(0.5)
        refused = 0
        for sock in held:
            sock.settimeout(0.5)
            try:
                answer = sock.recv(65536)
            except TimeoutError:
                continue  # still open, waiting for a request
            except ConnectionResetError:
                answer = b""
            assert answer == b"" or answer.startswith(b"HTTP/1.1 503 "), answer[:200]
            refused += 1
        assert refused >= 15
    finally:
        for sock in held:
            sock.close()
    # Half-open connections do not outlive the header timeout, and the server serves again.
    time.sleep(0.5)
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


# -- request bodies and connections per address (issue 29, item 3) ------------------------------------

BODY_LIMITS = {
    "FLOE_HEADER_TIMEOUT_SECONDS": "5",
    "FLOE_BODY_TIMEOUT_SECONDS": "2",
    "FLOE_BODY_MIN_BYTES_PER_SECOND": "1024",
    "FLOE_MAX_CONNECTIONS": "240",
    "FLOE_MAX_CONNECTIONS_PER_ADDRESS": "100",
}
# Within the token endpoint's 64 KiB (a Content-Length above it is refused at once, 413).
TRICKLED_HEAD = (
    b"POST /v1/oauth/tokens HTTP/1.1\r\nHost: floe\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 60000\r\n\r\n"
)


@pytest.fixture(scope="module")
def body_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    with CatalogProcess(home=Path(tmp_path_factory.mktemp("body-limits")), env=BODY_LIMITS) as process:
        yield process


def connect_from(server: CatalogProcess, source: str, timeout: float = 10) -> socket.socket:
    """A connection from the loopback address `source` (all of 127.0.0.0/8 is loopback on Linux)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout, source_address=(source, 0))
    sock.settimeout(timeout)
    return sock


def token_form(server: CatalogProcess, padding: int = 0) -> bytes:
    form = {
        "grant_type": "client_credentials",
        "client_id": server.admin_client_id,
        "client_secret": server.admin_client_secret,
        "scope": "catalog " + "x" * padding,
    }
    return urlencode(form).encode()


def token_request(body: bytes) -> bytes:
    return (
        b"POST /v1/oauth/tokens HTTP/1.1\r\nHost: floe\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    )


class Trickler:
    """A connection that sent a POST head announcing a large body and sends one byte of it now and then;
    what it was answered and when it was closed (seconds after its head)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.answer = b""
        self.head_sent = time.monotonic()
        self.closed_after: float | None = None
        sock.setblocking(False)

    def read(self) -> None:
        try:
            while chunk := self.sock.recv(65536):
                self.answer += chunk
        except BlockingIOError:
            return
        except (ConnectionResetError, BrokenPipeError):
            pass
        self.close()

    def send_byte(self) -> None:
        try:
            self.sock.send(b"a")
        except (BlockingIOError, InterruptedError):
            pass
        except (ConnectionResetError, BrokenPipeError):
            self.close()

    def close(self) -> None:
        if self.closed_after is None:
            self.closed_after = time.monotonic() - self.head_sent
            self.sock.close()


def trickle(tricklers: list[Trickler], seconds: float, also: threading.Event | None = None) -> None:
    """Send each open trickler a byte every half second and read what they are answered, for `seconds`
    (or until all are closed)."""
    selector = selectors.DefaultSelector()
    for trickler in tricklers:
        selector.register(trickler.sock, selectors.EVENT_READ, trickler)
    deadline = time.monotonic() + seconds
    next_byte = time.monotonic()
    while time.monotonic() < deadline and any(t.closed_after is None for t in tricklers):
        if time.monotonic() >= next_byte:
            for trickler in tricklers:
                if trickler.closed_after is None:
                    trickler.send_byte()
            next_byte += 0.5
        for key, _ in selector.select(timeout=0.05):
            trickler = key.data
            trickler.read()
            if trickler.closed_after is not None:
                selector.unregister(key.fileobj)
    selector.close()


def test_request_body_within_the_rate_is_served_after_the_body_timeout(body_server: CatalogProcess) -> None:
    """A body sent steadily at well over the minimum rate may take longer than the body timeout."""
    body = token_form(body_server, padding=12_000)  # ~12 KB at ~3 KB/s: about 4 s, the timeout is 2 s
    with connect_from(body_server, "127.0.0.3", timeout=20) as sock:
        request = token_request(body)
        head_end = request.index(b"\r\n\r\n") + 4
        sock.sendall(request[:head_end])
        started = time.monotonic()
        for offset in range(0, len(body), 1500):
            time.sleep(0.5)
            sock.sendall(body[offset : offset + 1500])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert time.monotonic() - started > 3
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    assert b"access_token" in answer


def test_a_trickled_body_gets_408_at_its_deadline(body_server: CatalogProcess) -> None:
    trickler = Trickler(connect_from(body_server, "127.0.0.4"))
    trickler.sock.sendall(TRICKLED_HEAD)
    trickler.head_sent = time.monotonic()
    trickle([trickler], seconds=15)
    assert trickler.answer.startswith(b"HTTP/1.1 408 "), trickler.answer[:300]
    assert b"Request body not received in time" in trickler.answer
    assert trickler.closed_after is not None
    assert 1.8 < trickler.closed_after < 4.5, trickler.closed_after


def test_a_body_trickled_after_the_answer_is_closed_at_its_deadline(body_server: CatalogProcess) -> None:
    """An answer sent without reading the body (a route that is not there) does not leave the
    connection to the trickler: it is closed at the body's deadline, without a second answer."""
    trickler = Trickler(connect_from(body_server, "127.0.0.5"))
    trickler.sock.sendall(TRICKLED_HEAD.replace(b"/v1/oauth/tokens", b"/no-such-route"))
    trickler.head_sent = time.monotonic()
    trickle([trickler], seconds=15)
    assert trickler.answer.startswith(b"HTTP/1.1 404 "), trickler.answer[:300]
    assert b" 408 " not in trickler.answer
    assert trickler.closed_after is not None
    assert 1.8 < trickler.closed_after < 4.5, trickler.closed_after


def test_tricklers_from_one_address_do_not_lock_out_others(body_server: CatalogProcess) -> None:
    """300 connections from one address trickle POST bodies, more than the server's connection cap
    (240), which they filled before (a client from anywhere got 503): now at most the per-address cap
    (100) are admitted and the rest are refused at once; a client from another address is served
    meanwhile; the admitted ones get 408 and are closed at the body deadline (2 s)."""
    tricklers = [Trickler(connect_from(body_server, "127.0.0.1")) for _ in range(300)]
    for trickler in tricklers:
        try:
            trickler.sock.send(TRICKLED_HEAD)
        except (ConnectionResetError, BrokenPipeError):
            trickler.close()
        trickler.head_sent = time.monotonic()
    served: list[bytes] = []
    probed: list[bytes] = []

    def other_client() -> None:
        # One more connection from the tricklers' address while they hold theirs, reading before it
        # writes: the refusal is sent at once, so it is read whole (a trickler that was writing its head
        # when the refusal came may see only the reset that discards it).
        with connect_from(body_server, "127.0.0.1", timeout=2) as probe:
            refusal = b""
            try:
                while chunk := probe.recv(65536):
                    refusal += chunk
            except (ConnectionResetError, TimeoutError):
                pass
            probed.append(refusal)
        time.sleep(0.5)  # while the tricklers hold their connections
        with connect_from(body_server, "127.0.0.2") as sock:
            sock.sendall(token_request(token_form(body_server)))
            answer = b""
            try:
                while chunk := sock.recv(65536):
                    answer += chunk
            except ConnectionResetError:
                pass  # refused (before, with 503) while the request was being sent
        served.append(answer)

    other = threading.Thread(target=other_client)
    other.start()
    trickle(tricklers, seconds=20)
    other.join(20)
    assert len(served) == 1
    assert served[0].startswith(b"HTTP/1.1 200 "), served[0][:300]

    refused = [t for t in tricklers if not t.answer.startswith(b"HTTP/1.1 408 ")]
    timed_out = [t for t in tricklers if t.answer.startswith(b"HTTP/1.1 408 ")]
    assert 0 < len(timed_out) <= 100
    assert len(refused) >= 200
    for trickler in refused:
        # 429 (or reset when the refusal crossed the head being sent), at once.
        assert trickler.answer == b"" or trickler.answer.startswith(b"HTTP/1.1 429 "), trickler.answer[:300]
        assert trickler.closed_after is not None
        assert trickler.closed_after < 1.5
    assert len(probed) == 1
    assert probed[0].startswith(b"HTTP/1.1 429 "), probed
    assert b"retry-after: 1" in probed[0].lower()
    for trickler in timed_out:
        assert trickler.closed_after is not None
        assert 1.8 < trickler.closed_after < 5, trickler.closed_after
    # Once they are gone, the address is served again.
    assert httpx.get(f"{body_server.url}/healthz", timeout=10).status_code == 200
