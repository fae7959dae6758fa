"""Every failure becomes the spec's `IcebergErrorResponse`, mapped here and nowhere else."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.types import ExceptionHandlersMap

from catalog.errors import CatalogError
from catalog.store.database_faults import RETRY_AFTER_SECONDS, UNAVAILABLE_MESSAGE, database_fault

log = logging.getLogger(__name__)

_HTTP_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "ForbiddenException",
    404: "NotFoundException",
    405: "MethodNotAllowedException",
    406: "UnsupportedOperationException",
    409: "ConflictException",
    413: "BadRequestException",
    415: "BadRequestException",
    429: "TooManyRequestsException",
    503: "ServiceUnavailableException",
}


# Messages echo names the client sent; a name can be tens of kilobytes (a path segment within the
# server's limits), and an error that repeats it whole only amplifies the request into logs and
# responses. Cut long messages, saying how much was left out.
MAX_MESSAGE_CHARS = 1_000


def bounded_message(message: str) -> str:
    """`message`, or its first `MAX_MESSAGE_CHARS` characters and how many more were left out."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[:MAX_MESSAGE_CHARS]}… ({len(message) - MAX_MESSAGE_CHARS} more characters)"


def error_body(status: int, error_type: str, message: str) -> bytes:
    message = bounded_message(message)
    return msgspec.json.encode({"error": {"message": message, "type": error_type, "code": status}})


def error_response(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> Response[bytes]:
    return Response(
        content=error_body(status, error_type, message),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


_RETRY_AFTER = {"Retry-After": str(RETRY_AFTER_SECONDS)}


def catalog_error_headers(exc: CatalogError) -> dict[str, str]:
    """The headers of a `CatalogError`'s answer."""
    if exc.status_code == 401:  # RFC 6750: name the scheme the client should authenticate with
        return {"WWW-Authenticate": 'Bearer realm="floe"'}
    if exc.status_code == 503:  # RFC 9110: when to try again
        return _RETRY_AFTER
    return {}


def _catalog_error(_: Request[Any, Any, Any], exc: CatalogError) -> Response[bytes]:
    return error_response(exc.status_code, exc.error_type, exc.message, catalog_error_headers(exc) or None)


def _validation_error(_: Request[Any, Any, Any], exc: ValidationException) -> Response[bytes]:
    detail = exc.detail
    if isinstance(exc.extra, list) and exc.extra:
        first = exc.extra[0]
        if isinstance(first, dict):
            detail = f"{detail}: {first.get('message', '')} ({first.get('key', first.get('source', ''))})"
    return error_response(400, "BadRequestException", f"Malformed request: {detail}")


def _http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    message = exc.detail
    if status == 413:
        message = "Request body too large"
    return error_response(status, _HTTP_TYPES.get(status, "RESTException"), message, exc.headers)


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
    """(status, spec error JSON, headers) every route answers `exc` with: Litestar's exception handlers
    and the hot routes alike."""
    if isinstance(exc, CatalogError):
        status, error_type, message = exc.status_code, exc.error_type, exc.message
        return status, error_body(status, error_type, message), catalog_error_headers(exc)
    status, error_type, message = unexpected_failure(exc, method, path)
    return status, error_body(status, error_type, message), _RETRY_AFTER if status == 503 else {}


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    status, error_type, message = unexpected_failure(exc, request.method, request.url.path)
    return error_response(status, error_type, message, _RETRY_AFTER if status == 503 else None)


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    CatalogError: _catalog_error,
    ValidationException: _validation_error,
    HTTPException: _http_error,
    Exception: _unexpected,
}
