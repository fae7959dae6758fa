"""Domain failures of the catalog, one type each.

Each error carries the HTTP status and the Iceberg exception type that Java, pyiceberg and DuckDB map;
`catalog.api.errors` turns them into the spec's `IcebergErrorResponse` in one place.
"""

from __future__ import annotations


class CatalogError(Exception):
    """Base of every error the catalog reports to a client."""

    status_code: int = 500
    error_type: str = "ServiceFailureException"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(CatalogError):
    status_code = 400
    error_type = "BadRequestException"


class InvalidArgument(BadRequest):
    """A request the Java reference refuses with `IllegalArgumentException` (a failed precondition): the Java
    client raises that exception type for this error type, where its callers expect it."""

    error_type = "IllegalArgumentException"


class LimitExceeded(BadRequest):
    """A name, namespace depth, schema width or property set beyond the server's limits
    (`catalog.service.quotas`): the request itself is too big, whoever sends it."""


class BodyTooLarge(CatalogError):
    """A request body longer than its operation allows (`catalog.api.body_limits`), declared or counted
    as it arrives: refused before it is read whole."""

    status_code = 413
    error_type = "BadRequestException"

    def __init__(self, limit: int) -> None:
        super().__init__("Request body too large")
        self.limit = limit


class QuotaExceeded(CatalogError):
    """A cluster already holds as many namespaces, tables, views or keys as its quota allows.

    403: Java and pyiceberg map it by status to ForbiddenException / ForbiddenError, which neither retries
    (429 and 503 are retried, and a 409 reads as AlreadyExists or CommitFailed, which Java retries)."""

    status_code = 403
    error_type = "QuotaExceededException"


class TooManyRequests(CatalogError):
    """More concurrent requests of a kind than one tenant may hold (retried after a while)."""

    status_code = 429


class NotAuthorized(CatalogError):
    status_code = 401
    error_type = "NotAuthorizedException"


class Forbidden(CatalogError):
    status_code = 403
    error_type = "ForbiddenException"


class NoSuchWarehouse(CatalogError):
    status_code = 404
    error_type = "NoSuchWarehouseException"


class NoSuchNamespace(CatalogError):
    status_code = 404
    error_type = "NoSuchNamespaceException"


class NoSuchTable(CatalogError):
    status_code = 404
    error_type = "NoSuchTableException"


class NoSuchView(CatalogError):
    status_code = 404
    error_type = "NoSuchViewException"


class NotFound(CatalogError):
    status_code = 404
    error_type = "NotFoundException"


class AlreadyExists(CatalogError):
    status_code = 409
    error_type = "AlreadyExistsException"


class NamespaceNotEmpty(CatalogError):
    status_code = 409
    error_type = "NamespaceNotEmptyException"


class CommitFailed(CatalogError):
    """A requirement did not hold on the current metadata: the client should refresh and retry."""

    status_code = 409
    error_type = "CommitFailedException"


class Unsupported(CatalogError):
    status_code = 406
    error_type = "UnsupportedOperationException"


class CommitStateUnknown(CatalogError):
    """The outcome of a commit cannot be known (e.g. the database vanished mid-commit)."""

    status_code = 500
    error_type = "CommitStateUnknownException"


class ServiceUnavailable(CatalogError):
    status_code = 503
    error_type = "ServiceUnavailableException"
