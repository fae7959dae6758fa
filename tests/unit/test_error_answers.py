"""catalog/api/errors.py is the one module that maps failures to answers; the layers below the app write
the same error document without importing it."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import cast

import pytest
from litestar.types import HTTPScope

from catalog.api.errors import (
    INVALID_IDEMPOTENCY_KEY,
    UNAUDITED_ANSWER,
    earlier_request_answer,
    failure,
    oauth_error,
    page_failure,
    refusal,
    token_failure,
)
from catalog.connection_limits import refusal as connection_refusal
from catalog.errors import NoSuchTable, NotAuthorized, ServiceUnavailable
from catalog.service.idempotency import Replay, SecretWithheld, StillRunning, UsedForOtherRequest
from catalog.service.security import OAuthFailure
from catalog.store.database_faults import RETRY_AFTER_SECONDS

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize(
    "module", ["catalog/connection_limits.py", "catalog/http_limits.py", "catalog/error_json.py"]
)
def test_the_layers_below_the_app_import_nothing_of_the_api(module: str) -> None:
    assert not {name for name in _imports(ROOT / module) if name.startswith("catalog.api")}


def _scope(method: str) -> HTTPScope:
    """The scope fields the answers read (an ASGI server gives many more)."""
    return cast(HTTPScope, {"type": "http", "method": method, "path": "/v1/x"})


def _document(body: bytes) -> dict[str, object]:
    error = json.loads(body)["error"]
    assert isinstance(error, dict)
    return error


def test_domain_failures_and_unexpected_ones() -> None:
    scope = _scope("GET")
    status, body, headers, is_json = failure(scope, NoSuchTable("Table does not exist: a.b"))
    assert (status, is_json, headers) == (404, True, [])
    assert _document(body) == {
        "message": "Table does not exist: a.b",
        "type": "NoSuchTableException",
        "code": 404,
    }
    status, body, headers, _ = failure(scope, ServiceUnavailable("down"))
    assert (status, headers) == (503, [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
    status, body, _, _ = failure(scope, RuntimeError("/secret/path in the message"))
    assert status == 500
    assert b"/secret/path" not in body
    assert _document(body)["message"] == "Internal server error: RuntimeError"


def test_refused_authentication_names_the_scheme() -> None:
    get = _scope("GET")
    status, body, headers, _ = refusal(get, NotAuthorized("Authentication required"))
    assert status == 401
    assert headers == [(b"www-authenticate", b'Bearer realm="floe"')]
    assert _document(body)["type"] == "NotAuthorizedException"
    assert refusal(_scope("HEAD"), NotAuthorized("no"))[1] == b""


def test_token_endpoint_failures_are_oauth2_errors() -> None:
    status, body, headers = oauth_error(OAuthFailure(401, "invalid_client", "bad secret"), basic=True)
    assert (status, json.loads(body)) == (401, {"error": "invalid_client", "error_description": "bad secret"})
    assert headers["WWW-Authenticate"] == 'Basic realm="floe"'
    assert headers["Cache-Control"] == "no-store"
    limited = OAuthFailure(429, "invalid_client", "slow down", retry_after=30)
    assert token_failure(limited, "POST", "/v1/oauth/tokens")[2]["Retry-After"] == "30"
    # Anything else the endpoint hits is answered as every route answers it.
    assert token_failure(RuntimeError("x"), "POST", "/v1/oauth/tokens")[0] == 500


def test_idempotency_and_audit_answers() -> None:
    assert INVALID_IDEMPOTENCY_KEY[0] == 400
    assert earlier_request_answer(UsedForOtherRequest())[0] == 422
    assert _document(earlier_request_answer(SecretWithheld(200))[1])["type"] == "SecretNotReplayedException"
    assert earlier_request_answer(StillRunning())[0] == 503
    replay = earlier_request_answer(Replay(200, '{"a": 1}', "application/json"))
    assert replay == (200, b'{"a": 1}', [(b"content-type", b"application/json")], False)
    assert earlier_request_answer(Replay(204, "", None))[2] == []
    assert UNAUDITED_ANSWER[0] == 503


def test_console_pages_show_what_the_api_answers() -> None:
    from litestar.exceptions import HTTPException

    assert page_failure(NoSuchTable("Table does not exist: a.b")) == (404, "Table does not exist: a.b")
    assert page_failure(HTTPException(status_code=405, detail="Method Not Allowed")) == (
        405,
        "Method Not Allowed",
    )
    assert page_failure(HTTPException(status_code=500, detail="boom at /srv/x")) == (500, "Internal error")


def test_connection_refusals_are_the_same_error_document() -> None:
    head, body = connection_refusal(431, "Request head larger than 8 bytes").split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 431 ")
    assert _document(body) == {
        "message": "Request head larger than 8 bytes",
        "type": "BadRequestException",
        "code": 431,
    }
