"""floe's OpenAPI document, generated from the Litestar app (committed as `openapi/floe.json`).

Litestar derives the paths, parameters and body schemas from the controllers and the msgspec structs in
`catalog.api.schemas`. This module completes what Litestar cannot see: the error responses (every one an
`IcebergErrorResponse`, shared ones named as in the Iceberg REST spec's `components.responses`), the
`Idempotency-Key` header the middleware honours on mutating routes, and it drops the random examples
Litestar invents for response schemas, so the document is the same on every run.

Regenerate with `floe openapi -o openapi/floe.json`; `tests/unit/test_openapi.py` fails while it is stale.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec

from catalog.api.app import build_litestar
from catalog.api.middleware import MUTATING_METHODS
from catalog.api.schemas import ErrorModel, IcebergErrorResponse
from catalog.settings import Settings

OPENAPI_PATH = Path(__file__).resolve().parents[2] / "openapi" / "floe.json"

JSON = "application/json"
ERROR_SCHEMA_REF = "#/components/schemas/IcebergErrorResponse"
IDEMPOTENCY_PARAMETER = "idempotency-key"
# The token endpoint answers with OAuth2 errors (RFC 6749), not `IcebergErrorResponse`.
OAUTH_PATHS = frozenset({"/v1/oauth/tokens"})


def _error_example(code: int, error_type: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "code": code}}


def _error_response(description: str, example: dict[str, Any] | None = None) -> dict[str, Any]:
    media: dict[str, Any] = {"schema": {"$ref": ERROR_SCHEMA_REF}}
    if example is not None:
        media["example"] = example
    return {"description": description, "content": {JSON: media}}


# Error responses every Iceberg operation can return: (status, name in the spec's components.responses).
SHARED_ERRORS: dict[str, str] = {
    "400": "BadRequestErrorResponse",
    "401": "UnauthorizedResponse",
    "403": "ForbiddenResponse",
    "503": "ServiceUnavailableResponse",
    "5XX": "ServerErrorResponse",
}

SHARED_RESPONSES: dict[str, dict[str, Any]] = {
    "BadRequestErrorResponse": _error_response(
        "Bad Request - BadRequestException: malformed JSON, a body that does not match the schema, an "
        "invalid namespace or name, or an invalid parameter.",
        _error_example(400, "BadRequestException", "Malformed request"),
    ),
    "UnauthorizedResponse": _error_response(
        "Unauthorized - NotAuthorizedException: the access token is missing, expired or invalid. The "
        "client may fetch a new token and retry.",
        _error_example(401, "NotAuthorizedException", "Not authorized to make this request"),
    ),
    "ForbiddenResponse": _error_response(
        "Forbidden - ForbiddenException: the caller may not do this.",
        _error_example(403, "ForbiddenException", "Not allowed to make this request"),
    ),
    "ServiceUnavailableResponse": _error_response(
        "Service Unavailable - ServiceUnavailableException: the database is unreachable, or a request "
        "with the same Idempotency-Key is still running. The client may retry.",
        _error_example(503, "ServiceUnavailableException", "Database unreachable"),
    ),
    "ServerErrorResponse": _error_response(
        "A server-side problem (ServiceFailureException) that the client cannot fix.",
        _error_example(500, "ServiceFailureException", "Internal server error: RuntimeError"),
    ),
}

_NO_NAMESPACE = "Not Found - NoSuchNamespaceException, the namespace does not exist"
_NO_TABLE = "Not Found - NoSuchTableException, the table (or its namespace) does not exist"
_NO_VIEW = "Not Found - NoSuchViewException, the view (or its namespace) does not exist"
_EXISTS = "Conflict - AlreadyExistsException, a table or view with this name already exists"
_COMMIT_FAILED = (
    "Conflict - CommitFailedException, a requirement failed or concurrent commits kept winning. "
    "The client should refresh the metadata and retry."
)
_COMMIT_UNKNOWN = (
    "Internal Server Error - CommitStateUnknownException, the database failed during the commit, which "
    "may or may not have been applied. The client must not clean up the files it wrote."
)
_NO_CLUSTER = "Not Found - NotFoundException, the cluster does not exist"
_NO_KEY = "Not Found - NotFoundException, the API key does not exist"
_SECRET_NOT_REPLAYED = (
    "Conflict - SecretNotReplayedException, a retry (same Idempotency-Key) of a request that succeeded: "
    "its secret was shown once and is never stored"
)
_WAREHOUSE_SUFFIX = "; NoSuchWarehouseException when `prefix` names no warehouse"

# Operation-specific error responses: operationId -> {status: description}.
OPERATION_ERRORS: dict[str, dict[str, str]] = {
    "getConfig": {"404": "Not Found - NoSuchWarehouseException, the `warehouse` does not exist"},
    "listNamespaces": {"404": "Not Found - NoSuchNamespaceException, the `parent` namespace does not exist"},
    "createNamespace": {"409": "Conflict - AlreadyExistsException, the namespace already exists"},
    "loadNamespaceMetadata": {"404": _NO_NAMESPACE},
    "namespaceExists": {"404": _NO_NAMESPACE},
    "dropNamespace": {
        "404": _NO_NAMESPACE,
        "409": "Conflict - NamespaceNotEmptyException, the namespace still holds tables, views or namespaces",
    },
    "updateProperties": {"404": _NO_NAMESPACE},
    "listTables": {"404": _NO_NAMESPACE},
    "createTable": {"404": _NO_NAMESPACE, "409": _EXISTS},
    "registerTable": {"404": _NO_NAMESPACE, "409": _EXISTS},
    "loadTable": {"404": _NO_TABLE},
    "updateTable": {"404": _NO_TABLE, "409": _COMMIT_FAILED, "500": _COMMIT_UNKNOWN},
    "dropTable": {"404": _NO_TABLE},
    "tableExists": {"404": _NO_TABLE},
    "unregisterTable": {"404": _NO_TABLE},
    "loadCredentials": {"404": _NO_TABLE},
    "reportMetrics": {"404": _NO_TABLE},
    "renameTable": {
        "404": "Not Found - NoSuchTableException or NoSuchNamespaceException, the source table or the "
        "destination namespace does not exist",
        "409": "Conflict - AlreadyExistsException, the destination name is taken",
    },
    "commitTransaction": {
        "404": "Not Found - NoSuchTableException, a table in the transaction does not exist",
        "409": _COMMIT_FAILED,
        "500": _COMMIT_UNKNOWN,
    },
    "listViews": {"404": _NO_NAMESPACE},
    "createView": {"404": _NO_NAMESPACE, "409": _EXISTS},
    "loadView": {"404": _NO_VIEW},
    "replaceView": {"404": _NO_VIEW, "409": _COMMIT_FAILED},
    "dropView": {"404": _NO_VIEW},
    "viewExists": {"404": _NO_VIEW},
    "renameView": {
        "404": "Not Found - NoSuchViewException or NoSuchNamespaceException, the source view or the "
        "destination namespace does not exist",
        "409": "Conflict - AlreadyExistsException, the destination name is taken",
    },
    "registerView": {"404": _NO_NAMESPACE, "409": _EXISTS},
    # The management API.
    "createCluster": {
        "404": "Not Found - NoSuchWarehouseException, the `warehouse` does not exist",
        "409": "Conflict - AlreadyExistsException, a cluster with this name already exists",
    },
    "getCluster": {"404": _NO_CLUSTER},
    "deleteCluster": {
        "404": _NO_CLUSTER,
        "409": "Conflict - NamespaceNotEmptyException, the cluster's namespace still holds tables",
    },
    "createKey": {"404": _NO_CLUSTER, "409": _SECRET_NOT_REPLAYED},
    "revokeKey": {"404": _NO_KEY},
    "rotateKey": {"404": _NO_KEY, "409": _SECRET_NOT_REPLAYED},
    "getKafkaOffsets": {
        "404": "Not Found - NoSuchWarehouseException, NoSuchNamespaceException or NoSuchTableException"
    },
    "recordMaintenancePass": {"404": "Not Found - NoSuchWarehouseException, the `warehouse` does not exist"},
    "getPipeline": {"404": "Not Found - NotFoundException, no pipeline configuration was applied yet"},
    "applyPipeline": {
        "409": "Conflict - CommitFailedException, another apply or commit changed the tables or the "
        "revision meanwhile: re-run the apply"
    },
}

IDEMPOTENCY_KEY: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": 64},
    "description": (
        "Optional client-provided key (a UUIDv7 per the spec) that makes retries safe. A retry with the "
        "same key by the same caller gets the stored final response (2xx and 4xx) without running the "
        "operation again; keys of different callers never meet. 5xx responses are not stored, so the "
        "client may retry them. A response that carried a secret (a key's `client_secret`, vended "
        "storage credentials) is never stored: its retry answers 409 SecretNotReplayedException. A retry "
        "that arrives while the first request runs waits for its outcome. Keys live for "
        "`idempotency-key-lifetime` from `/v1/config`."
    ),
}
IDEMPOTENCY_REUSED = _error_response(
    "Unprocessable Entity - the Idempotency-Key was already used for a different request",
    _error_example(422, "BadRequestException", "Idempotency-Key was already used for a different request"),
)

_HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def _drop_generated_examples(node: Any) -> Any:
    """Remove JSON-schema `examples` lists, which Litestar fills with random values for `ResponseSpec`s.

    OpenAPI `examples` maps (on media types and parameters) are kept: only lists are generated.
    """
    if isinstance(node, dict):
        return {
            key: _drop_generated_examples(value)
            for key, value in node.items()
            if not (key == "examples" and isinstance(value, list))
        }
    if isinstance(node, list):
        return [_drop_generated_examples(item) for item in node]
    return node


def _is_litestar_validation_error(response: dict[str, Any]) -> bool:
    """Litestar documents its own `ValidationException` body for 400; floe answers with the spec's."""
    schema = response.get("content", {}).get(JSON, {}).get("schema", {})
    return set(schema.get("properties", {})) == {"status_code", "detail", "extra"}


def _error_components() -> dict[str, Any]:
    """`ErrorModel` and `IcebergErrorResponse` as JSON schemas, from the structs in `schemas.py`."""
    _, components = msgspec.json.schema_components(
        [IcebergErrorResponse, ErrorModel], ref_template="#/components/schemas/{name}"
    )
    return components


def _complete_operation(path: str, method: str, operation: dict[str, Any]) -> None:
    """Add the error responses and the `Idempotency-Key` header to one Iceberg operation."""
    responses: dict[str, Any] = operation.setdefault("responses", {})
    if "400" in responses and _is_litestar_validation_error(responses["400"]):
        del responses["400"]
    for status, name in SHARED_ERRORS.items():
        responses.setdefault(status, {"$ref": f"#/components/responses/{name}"})
    in_warehouse = path.startswith("/v1/{prefix}")
    specific = dict(OPERATION_ERRORS.get(operation.get("operationId", ""), {}))
    if in_warehouse:
        specific["404"] = specific.get("404", "Not Found") + _WAREHOUSE_SUFFIX
    for status, description in specific.items():
        responses.setdefault(status, _error_response(description))
    if in_warehouse and method.upper() in MUTATING_METHODS:
        operation.setdefault("parameters", []).append(
            {"$ref": f"#/components/parameters/{IDEMPOTENCY_PARAMETER}"}
        )
        responses.setdefault("422", IDEMPOTENCY_REUSED)


def _complete_oauth_operation(operation: dict[str, Any]) -> None:
    """The token endpoint answers errors as OAuth2 (RFC 6749) error JSON, as the spec documents."""
    responses: dict[str, Any] = operation.setdefault("responses", {})
    oauth_error = {"$ref": "#/components/schemas/OAuthError"}
    responses["5XX"] = {"description": "OAuth2 server error", "content": {JSON: {"schema": oauth_error}}}


def openapi_document() -> dict[str, Any]:
    """floe's OpenAPI document as a JSON object."""
    # No database or files are touched: the app is only built, never started.
    settings = Settings.from_env({"FLOE_HOME": "/nonexistent-floe-home"})
    app = build_litestar(settings)
    document: dict[str, Any] = _drop_generated_examples(app.openapi_schema.to_schema())
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if method not in _HTTP_METHODS:
                continue
            if path in OAUTH_PATHS:
                _complete_oauth_operation(operation)
            elif path.startswith(("/v1/", "/management/v1/")):
                _complete_operation(path, method, operation)
    components = document.setdefault("components", {})
    components.setdefault("schemas", {}).update(_error_components())
    components.setdefault("responses", {}).update(SHARED_RESPONSES)
    components.setdefault("parameters", {})[IDEMPOTENCY_PARAMETER] = IDEMPOTENCY_KEY
    # The constants above are shared between operations: hand out a copy the caller may change.
    return copy.deepcopy(document)


def render_openapi() -> str:
    """The document as deterministic JSON text (sorted keys, two-space indent, trailing newline)."""
    return json.dumps(openapi_document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
