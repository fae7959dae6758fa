"""The spec's `IcebergErrorResponse` document: how every layer (the connection limits below the app, the
API above it) writes an error body. Which failure gets which answer is decided in `catalog.api.errors`."""

from __future__ import annotations

import msgspec

# The Iceberg exception type of an answer that no `CatalogError` names (HTTP-level refusals).
HTTP_ERROR_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "ForbiddenException",
    404: "NotFoundException",
    405: "MethodNotAllowedException",
    406: "UnsupportedOperationException",
    408: "BadRequestException",
    409: "ConflictException",
    413: "BadRequestException",
    415: "BadRequestException",
    429: "TooManyRequestsException",
    431: "BadRequestException",
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
    """The error document's JSON bytes."""
    message = bounded_message(message)
    return msgspec.json.encode({"error": {"message": message, "type": error_type, "code": status}})
