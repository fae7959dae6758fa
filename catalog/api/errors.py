"""Every failure becomes the spec's `IcebergErrorResponse`, mapped here and nowhere else."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.types import ExceptionHandlersMap

from catalog.errors import CatalogError

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


def error_body(status: int, error_type: str, message: str) -> bytes:
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


def _catalog_error(_: Request[Any, Any, Any], exc: CatalogError) -> Response[bytes]:
    # RFC 6750: a 401 names the scheme the client should authenticate with.
    headers = {"WWW-Authenticate": 'Bearer realm="floe"'} if exc.status_code == 401 else None
    return error_response(exc.status_code, exc.error_type, exc.message, headers)


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


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "ServiceFailureException", f"Internal server error: {type(exc).__name__}")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    CatalogError: _catalog_error,
    ValidationException: _validation_error,
    HTTPException: _http_error,
    Exception: _unexpected,
}
