"""A request body's limit is one step of the request pipeline (issue 32): `limits`, right after the
request id, metrics and access line and the audit step, before authentication and the handler
(catalog/api/body_limits.py). Each operation has its limit (the token endpoint 64 KiB, every other route
FLOE_MAX_BODY_BYTES); a declared Content-Length over it is refused before any body is read, a chunked
body as soon as it passes it: 413 with the spec's error JSON, OAuth2 error JSON on the token endpoint.

Served in-process (Litestar's TestClient over `create_app`); the chunked cases drive the app's ASGI
interface directly, so each test sees how much of the body the app asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from litestar.testing import TestClient
from litestar.types import ASGIApp, HTTPDisconnectEvent, HTTPRequestEvent, Message, ReceiveMessage

from catalog.api.app import create_app
from catalog.api.routing import MAX_TOKEN_REQUEST_BYTES
from catalog.settings import Settings

LIMIT = 4096  # FLOE_MAX_BODY_BYTES here
CHUNK = 1024
SECRET = "a-secret-of-enough-length"
TOKEN_PATH = "/v1/oauth/tokens"
FORM = "application/x-www-form-urlencoded"
REST_TOO_LARGE = {"error": {"message": "Request body too large", "type": "BadRequestException", "code": 413}}
TOKEN_TOO_LARGE = {"error": "invalid_request", "error_description": "The token request is too large"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    home = Path(tmp_path_factory.mktemp("body-limits"))
    settings = Settings.from_env(
        {
            "FLOE_HOME": str(home),
            "FLOE_ADMIN_CLIENT_ID": "admin",
            "FLOE_ADMIN_CLIENT_SECRET": SECRET,
            "FLOE_MAX_BODY_BYTES": str(LIMIT),
        }
    )
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture(scope="module")
def bearer(client: TestClient[Any]) -> dict[str, str]:
    answer = client.post(TOKEN_PATH, data=_credentials())
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['access_token']}"}


def _credentials(**extra: str) -> dict[str, str]:
    return {"grant_type": "client_credentials", "client_id": "admin", "client_secret": SECRET, **extra}


def _namespace_body(name: str, size: int) -> bytes:
    """A createNamespace body of exactly `size` bytes (padded with JSON whitespace)."""
    body = json.dumps({"namespace": [name]}).encode()
    assert len(body) <= size
    return body[:-1] + b" " * (size - len(body)) + b"}"


def _token_form(size: int) -> bytes:
    """A valid client-credentials form of exactly `size` bytes (padded in a field the endpoint ignores)."""
    form = urlencode(_credentials(padding="")).encode()
    return form + b"x" * (size - len(form))


class Exchange:
    """One request through the app's ASGI interface: its body sent in `chunks` without a Content-Length
    unless `headers` declare one; what was answered and how many chunks the app asked for."""

    def __init__(self, method: str, path: str, headers: dict[str, str], chunks: list[bytes]) -> None:
        self.method, self.path, self.headers, self.chunks = method, path, headers, chunks
        self.delivered = 0
        self.status = 0
        self.response_headers: dict[str, str] = {}
        self.body = b""

    async def run(self, app: ASGIApp) -> Exchange:
        headers = [(b"host", b"floe.test")]
        headers += [(name.lower().encode(), value.encode()) for name, value in self.headers.items()]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": self.method,
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 40000),
            "server": ("floe.test", 80),
        }
        await app(scope, self.receive, self.send)  # type: ignore[arg-type]
        return self

    async def receive(self) -> ReceiveMessage:
        if self.delivered == len(self.chunks) and self.chunks:
            return HTTPDisconnectEvent(type="http.disconnect")
        self.delivered += 1
        body = self.chunks[self.delivered - 1] if self.chunks else b""
        return HTTPRequestEvent(type="http.request", body=body, more_body=self.delivered < len(self.chunks))

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.response_headers = {k.decode(): v.decode() for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")

    def json(self) -> Any:
        return json.loads(self.body)


def exchange(
    client: TestClient[Any], method: str, path: str, headers: dict[str, str], chunks: list[bytes]
) -> Exchange:
    # The served app as the test client calls it (`create_app`'s pipeline, with the app's state).
    done: Exchange = client.blocking_portal.call(Exchange(method, path, headers, chunks).run, client.app)
    return done


def chunked(size: int) -> list[bytes]:
    return [b" " * CHUNK] * (size // CHUNK)


# -- declared lengths -------------------------------------------------------------------------------


def test_a_declared_body_over_the_limit_is_refused_413_with_the_spec_error(
    client: TestClient[Any], bearer: dict[str, str]
) -> None:
    body = _namespace_body("too_large", LIMIT + 1)
    answer = client.post(
        "/v1/default/namespaces", content=body, headers={**bearer, "Content-Type": "application/json"}
    )
    assert answer.status_code == 413, answer.text
    assert answer.json() == REST_TOO_LARGE
    assert answer.headers["x-request-id"]
    assert client.get("/v1/default/namespaces/too_large", headers=bearer).status_code == 404


def test_a_body_at_the_limit_is_accepted(client: TestClient[Any], bearer: dict[str, str]) -> None:
    body = _namespace_body("at_the_limit", LIMIT)
    answer = client.post(
        "/v1/default/namespaces", content=body, headers={**bearer, "Content-Type": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    assert client.get("/v1/default/namespaces/at_the_limit", headers=bearer).status_code == 200


def test_an_oversized_request_is_refused_before_authentication_and_before_its_body_is_read(
    client: TestClient[Any],
) -> None:
    """No token, a Content-Length over the limit: 413 (limits come before authentication), and the app
    never asked for the body."""
    declared = {"Content-Type": "application/json", "Content-Length": str(LIMIT + 1)}
    refused = exchange(client, "POST", "/v1/default/namespaces", declared, [b"x" * (LIMIT + 1)])
    assert refused.status == 413
    assert refused.json() == REST_TOO_LARGE
    assert refused.delivered == 0
    assert "www-authenticate" not in refused.response_headers
    # A declared length of more digits than any limit: refused alike.
    huge = exchange(client, "POST", "/v1/default/namespaces", {"Content-Length": "9" * 40}, [])
    assert (huge.status, huge.delivered) == (413, 0)
    # Within the limit, the same request is refused for want of a token.
    small = exchange(client, "POST", "/v1/default/namespaces", {"Content-Length": "2"}, [b"{}"])
    assert small.status == 401


def test_the_token_endpoint_refuses_a_declared_body_over_64_kib_with_oauth2_error_json(
    client: TestClient[Any],
) -> None:
    answer = client.post(
        TOKEN_PATH, content=_token_form(MAX_TOKEN_REQUEST_BYTES + 1), headers={"Content-Type": FORM}
    )
    assert answer.status_code == 413, answer.text
    assert answer.json() == TOKEN_TOO_LARGE
    assert answer.headers["cache-control"] == "no-store"
    # The body was not read: the app never asked for it.
    declared = {"Content-Type": FORM, "Content-Length": str(MAX_TOKEN_REQUEST_BYTES + 1)}
    refused = exchange(client, "POST", TOKEN_PATH, declared, [b"x" * (MAX_TOKEN_REQUEST_BYTES + 1)])
    assert (refused.status, refused.json(), refused.delivered) == (413, TOKEN_TOO_LARGE, 0)
    # A token request Litestar answers (not a form body) has the same limit and the same answer.
    other = client.post(
        TOKEN_PATH,
        content=b"{" + b" " * MAX_TOKEN_REQUEST_BYTES + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert other.status_code == 413, other.text
    assert other.json() == TOKEN_TOO_LARGE


def test_a_token_request_at_64_kib_is_granted(client: TestClient[Any]) -> None:
    answer = client.post(
        TOKEN_PATH, content=_token_form(MAX_TOKEN_REQUEST_BYTES), headers={"Content-Type": FORM}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["access_token"]


# -- chunked bodies ---------------------------------------------------------------------------------


def test_a_chunked_body_is_refused_once_it_passes_the_limit(
    client: TestClient[Any], bearer: dict[str, str]
) -> None:
    """No Content-Length: the body is counted as it arrives and refused at the chunk that passes the
    limit, the rest never asked for."""
    headers = {**bearer, "Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    refused = exchange(client, "POST", "/v1/default/namespaces", headers, chunked(LIMIT * 10))
    assert refused.status == 413
    assert refused.json() == REST_TOO_LARGE
    assert refused.delivered == LIMIT // CHUNK + 1
    body = _namespace_body("chunked_at_the_limit", LIMIT)
    accepted = exchange(client, "POST", "/v1/default/namespaces", headers, [body[:CHUNK], body[CHUNK:]])
    assert accepted.status == 200, accepted.body


def test_a_chunked_token_request_is_refused_once_it_passes_64_kib(client: TestClient[Any]) -> None:
    headers = {"Content-Type": FORM, "Transfer-Encoding": "chunked"}
    refused = exchange(client, "POST", TOKEN_PATH, headers, chunked(MAX_TOKEN_REQUEST_BYTES * 4))
    assert refused.status == 413
    assert refused.json() == TOKEN_TOO_LARGE
    assert refused.delivered == MAX_TOKEN_REQUEST_BYTES // CHUNK + 1
    form = _token_form(MAX_TOKEN_REQUEST_BYTES)
    granted = exchange(client, "POST", TOKEN_PATH, headers, [form[:CHUNK], form[CHUNK:]])
    assert granted.status == 200, granted.body


def test_an_unauthenticated_chunked_body_is_refused_without_being_read(client: TestClient[Any]) -> None:
    """Without a declared length there is nothing to refuse before authentication: the caller is
    refused (401) before any of the body is asked for."""
    headers = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    refused = exchange(client, "POST", "/v1/default/namespaces", headers, chunked(LIMIT * 10))
    assert refused.status == 401
    assert refused.delivered == 0


# -- requests no route serves, and bodies nobody reads ------------------------------------------------


def test_requests_no_route_serves_are_bounded_and_still_answered_by_litestar(client: TestClient[Any]) -> None:
    too_large = exchange(
        client, "POST", "/no/such/route", {"Content-Length": str(LIMIT + 1)}, [b"x" * (LIMIT + 1)]
    )
    assert (too_large.status, too_large.json(), too_large.delivered) == (413, REST_TOO_LARGE, 0)
    within = exchange(client, "POST", "/no/such/route", {"Content-Length": "2"}, [b"{}"])
    assert within.status == 404
    # A chunked body to a path no route serves is never asked for (nothing is buffered), and a method
    # the route does not serve is still Litestar's 405.
    unread = exchange(client, "POST", "/no/such/route", {"Transfer-Encoding": "chunked"}, chunked(LIMIT * 10))
    assert (unread.status, unread.delivered) == (404, 0)
    assert exchange(client, "DELETE", TOKEN_PATH, {"Content-Length": "2"}, [b"{}"]).status == 405


def test_get_requests_do_not_pass_the_limits_step(client: TestClient[Any], bearer: dict[str, str]) -> None:
    """No handler reads the body of a GET: it is answered as if it had none, and never asked for."""
    headers = {**bearer, "Content-Length": str(LIMIT * 10)}
    answer = exchange(client, "GET", "/v1/default/namespaces", headers, [b"x" * LIMIT * 10])
    assert answer.status == 200, answer.body
    assert answer.delivered == 0


def test_a_mutation_refused_for_its_size_is_audited(client: TestClient[Any], bearer: dict[str, str]) -> None:
    """The audit step comes before limits: a refusal for size is recorded like any other, under the
    operation it asked for and with its status, whether refused on its declared length or as it came."""
    declared = {"Content-Type": "application/json", "Content-Length": str(LIMIT + 1)}
    refused = exchange(client, "POST", "/v1/default/namespaces", declared, [b"x" * (LIMIT + 1)])
    came = exchange(client, "POST", "/v1/default/namespaces", {**bearer}, chunked(LIMIT * 2))
    assert (refused.status, came.status) == (413, 413)
    listed = client.get("/management/v1/audit", params={"action": "createNamespace"}, headers=bearer)
    assert listed.status_code == 200, listed.text
    ids = {refused.response_headers["x-request-id"], came.response_headers["x-request-id"]}
    statuses = {e["request_id"]: e["status_code"] for e in listed.json()["entries"] if e["request_id"] in ids}
    assert statuses == dict.fromkeys(ids, 413)
