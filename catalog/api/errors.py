"""Every failure's answer, mapped here and nowhere else: the spec's `IcebergErrorResponse` for the REST
and management APIs (domain errors, refused authentication, idempotency conflicts, a refused floe.yaml
with every error's YAML path, a body over its limit, unexpected failures), OAuth2 error JSON (RFC 6749
§5.2) for the token endpoint (`failure` picks by the request's route), and the status and message of
the console's error page. The error document itself is written
by `catalog.error_json`, which the connection limits below the app use as well.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.types import ExceptionHandlersMap, Message, Scope, Send

from catalog.error_json import HTTP_ERROR_TYPES, bounded_message, error_body
from catalog.errors import BodyTooLarge, CatalogError
from catalog.pipelines import InvalidConfig
from catalog.service.idempotency import ClaimOutcome, Replay, SecretWithheld, UsedForOtherRequest
from catalog.service.security import OAuthFailure
from catalog.store.database_faults import RETRY_AFTER_SECONDS, UNAVAILABLE_MESSAGE, database_fault

log = logging.getLogger(__name__)

__all__ = [
    "EXCEPTION_HANDLERS",
    "TOKEN_PATH",
    "Answer",
    "OAuthError",
    "TokenAnswer",
    "bounded_message",
    "error_body",
    "failure",
    "failure_answer",
    "oauth_error",
    "refusal",
    "send_answer",
]

# An answer built before it is sent: status, body, headers beside the body's length and type (lower-case
# names), whether the body is JSON.
Answer = tuple[int, bytes, list[tuple[bytes, bytes]], bool]
# (status, JSON body, headers) of a token endpoint answer.
TokenAnswer = tuple[int, bytes, dict[str, str]]

# The token endpoint: its failures are answered with OAuth2 error JSON.
TOKEN_PATH = "/v1/oauth/tokens"

_RETRY_AFTER = {"Retry-After": str(RETRY_AFTER_SECONDS)}
_BEARER_CHALLENGE = 'Bearer realm="floe"'


def encode_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


def answer_messages(answer: Answer, *extra: tuple[bytes, bytes]) -> tuple[Message, Message]:
    """The ASGI start and body messages of `answer` (a 304 without a length), `extra` headers last."""
    status, body, headers, json = answer
    start = [(b"content-length", str(len(body)).encode())] if status != 304 else []
    if json:
        start.append((b"content-type", b"application/json"))
    return (
        {"type": "http.response.start", "status": status, "headers": [*start, *headers, *extra]},
        {"type": "http.response.body", "body": body, "more_body": False},
    )


async def send_answer(send: Send, answer: Answer, *extra: tuple[bytes, bytes]) -> None:
    """Send `answer`, with `extra` headers after its own."""
    start, body = answer_messages(answer, *extra)
    await send(start)
    await send(body)


def error_answer(status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> Answer:
    return status, error_body(status, error_type, message), encode_headers(headers or {}), True


# -- domain and unexpected failures ----------------------------------------------------------------


def catalog_error_headers(exc: CatalogError) -> dict[str, str]:
    """The headers of a `CatalogError`'s answer."""
    if exc.status_code == 401:  # RFC 6750: name the scheme the client should authenticate with
        return {"WWW-Authenticate": _BEARER_CHALLENGE}
    if exc.status_code == 503:  # RFC 9110: when to try again
        return _RETRY_AFTER
    return {}


# PostgreSQL data exceptions caused by a value the client sent (the API validates what it knows of;
# this keeps any value it missed a 400): NUL in text, and integers beyond the column's range.
_CLIENT_DATA_SQLSTATES = {
    "22021": "strings must not contain NUL characters",
    "22P05": "strings must not contain NUL characters",
    "22003": "a number is out of range",
}


def _client_data_error(exc: BaseException) -> str | None:
    """What is wrong with the request when `exc` is one of `_CLIENT_DATA_SQLSTATES` (asyncpg errors
    come bare from the read pool and wrapped by SQLAlchemy elsewhere)."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return None
        if (message := _CLIENT_DATA_SQLSTATES.get(str(getattr(seen, "sqlstate", "")))) is not None:
            return message
        seen = getattr(seen, "orig", None) or seen.__cause__
    return None


def unexpected_failure(exc: Exception, method: str, path: str) -> tuple[int, str, str]:
    """(status, error type, message) of an exception that is no `CatalogError`: a 400 when the client's
    data caused it, a 503 when the database is unreachable or did not answer in time (see
    `failure_answer` for its `Retry-After`), else a logged 500 that names only the exception's type."""
    if (problem := _client_data_error(exc)) is not None:
        return 400, "BadRequestException", f"Malformed request: {problem}"
    if database_fault(exc):
        log.warning("database unavailable on %s %s: %s", method, path, type(exc).__name__)
        return 503, "ServiceUnavailableException", UNAVAILABLE_MESSAGE
    log.exception("unhandled error on %s %s", method, path)
    return 500, "ServiceFailureException", f"Internal server error: {type(exc).__name__}"


def failure_answer(exc: Exception, method: str, path: str) -> tuple[int, bytes, dict[str, str]]:
    """(status, spec error JSON, headers) every route answers `exc` with."""
    if isinstance(exc, CatalogError):
        status, error_type, message = exc.status_code, exc.error_type, exc.message
        return status, error_body(status, error_type, message), catalog_error_headers(exc)
    status, error_type, message = unexpected_failure(exc, method, path)
    return status, error_body(status, error_type, message), _RETRY_AFTER if status == 503 else {}


def failure(scope: Scope, exc: Exception) -> Answer:
    """The `Answer` to a request whose handling raised `exc`: OAuth2 error JSON on the token endpoint,
    else the spec's error JSON."""
    method, path = str(scope.get("method", "")), str(scope.get("path", ""))
    if scope.get("path_template") == TOKEN_PATH:
        status, body, headers = token_failure(exc, method, path)
    else:
        status, body, headers = failure_answer(exc, method, path)
    return status, body, encode_headers(headers), True


def refusal(scope: Scope, exc: CatalogError) -> Answer:
    """The answer to a refused authentication, naming the scheme to use (RFC 6750)."""
    body = b"" if scope.get("method") == "HEAD" else error_body(exc.status_code, exc.error_type, exc.message)
    if exc.status_code == 503:  # the caller could not be checked (the database is unavailable)
        return exc.status_code, body, encode_headers(catalog_error_headers(exc)), True
    return exc.status_code, body, [(b"www-authenticate", _BEARER_CHALLENGE.encode())], True


# -- the token endpoint: OAuth2 errors --------------------------------------------------------------


class OAuthError(msgspec.Struct, omit_defaults=True):
    """RFC 6749 §5.2 error response."""

    error: str
    error_description: str | None = None
    error_uri: str | None = None


def oauth_error(exc: OAuthFailure, *, basic: bool) -> TokenAnswer:
    """The token endpoint's answer to `exc` (`basic`: the client authenticated with HTTP Basic)."""
    headers = {"Cache-Control": "no-store"}
    if exc.status == 401 and basic:
        headers["WWW-Authenticate"] = 'Basic realm="floe"'
    if exc.retry_after is not None:
        headers["Retry-After"] = str(exc.retry_after)
    return exc.status, msgspec.json.encode(OAuthError(exc.error, exc.description)), headers


def token_failure(exc: Exception, method: str, path: str) -> TokenAnswer:
    """The token endpoint's answer to any failure."""
    if isinstance(exc, BodyTooLarge):
        exc = OAuthFailure(413, "invalid_request", "The token request is too large")
    if isinstance(exc, OAuthFailure):
        return oauth_error(exc, basic=False)
    return failure_answer(exc, method, path)


# -- idempotency and audit ------------------------------------------------------------------------

INVALID_IDEMPOTENCY_KEY = error_answer(400, "BadRequestException", "Invalid Idempotency-Key: expected a UUID")


def earlier_request_answer(outcome: ClaimOutcome) -> Answer:
    """The answer to a retry whose `Idempotency-Key` an earlier request holds or held."""
    if isinstance(outcome, UsedForOtherRequest):
        message = "Idempotency-Key was already used for a different request"
        return error_answer(422, "BadRequestException", message)
    if isinstance(outcome, Replay):
        payload = outcome.body.encode()
        content_type = (outcome.content_type or "application/json").encode()
        return outcome.status_code, payload, [(b"content-type", content_type)] if payload else [], False
    if isinstance(outcome, SecretWithheld):
        return error_answer(
            409,
            "SecretNotReplayedException",
            f"The request with this Idempotency-Key already succeeded (HTTP {outcome.status_code}); "
            "its response carried a secret, which is shown only once and never stored",
        )
    message = "A request with this Idempotency-Key is still running"
    return error_answer(503, "ServiceUnavailableException", message)


# The answer to a successful mutation whose audit entry could not be written (the change may be applied).
UNAUDITED_ANSWER = error_answer(
    503,
    "ServiceUnavailableException",
    "The request's audit entry could not be written (database unavailable), so its answer is withheld: "
    "the change may have been applied; retry with the same Idempotency-Key to learn its outcome",
)


# -- the console's error page ------------------------------------------------------------------------


def page_failure(exc: CatalogError | HTTPException) -> tuple[int, str]:
    """(status, message) of the console's error page: a domain failure's status and message as the REST
    API answers them; Litestar's own client errors (a malformed query parameter, an unknown method) with
    theirs; anything else an internal error."""
    if isinstance(exc, CatalogError):
        return exc.status_code, bounded_message(exc.message)
    if 400 <= exc.status_code < 500:
        return exc.status_code, bounded_message(exc.detail)
    return 500, "Internal error"


# -- Litestar's exception handlers ------------------------------------------------------------------


def _response(answer: Answer) -> Response[bytes]:
    status, body, headers, _ = answer
    return Response(
        content=body,
        status_code=status,
        media_type="application/json",
        headers={name.decode("latin-1"): value.decode("latin-1") for name, value in headers} or None,
    )


def _catalog_error(request: Request[Any, Any, Any], exc: CatalogError) -> Response[bytes]:
    return _response(failure(request.scope, exc))


def _validation_error(_: Request[Any, Any, Any], exc: ValidationException) -> Response[bytes]:
    detail = exc.detail
    if isinstance(exc.extra, list) and exc.extra:
        first = exc.extra[0]
        if isinstance(first, dict):
            detail = f"{detail}: {first.get('message', '')} ({first.get('key', first.get('source', ''))})"
    return _response(error_answer(400, "BadRequestException", f"Malformed request: {detail}"))


def _http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    error_type = HTTP_ERROR_TYPES.get(status, "RESTException")
    return _response(error_answer(status, error_type, exc.detail, exc.headers))


def _invalid_config(_: Request[Any, Any, Any], exc: InvalidConfig) -> Response[bytes]:
    """A refused floe.yaml: 400 in the spec's error shape, every error and its YAML path in
    `error.errors`."""
    body = {
        "error": {
            "message": exc.summary(),
            "type": "BadRequestException",
            "code": 400,
            "errors": [e.to_json() for e in exc.errors],
        }
    }
    return _response((400, msgspec.json.encode(body), [], True))


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    status, error_type, message = unexpected_failure(exc, request.method, request.url.path)
    return _response(error_answer(status, error_type, message, _RETRY_AFTER if status == 503 else None))


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    CatalogError: _catalog_error,
    InvalidConfig: _invalid_config,
    ValidationException: _validation_error,
    HTTPException: _http_error,
    Exception: _unexpected,
}
