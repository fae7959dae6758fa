"""floe's OpenAPI document: the committed copy is current, and it conforms to the Iceberg REST spec.

The reference is the Apache Iceberg REST catalog specification, vendored with its source and version
in `openapi/iceberg-rest-catalog-open-api.yaml` (see `openapi/README.md`). Every operation of the spec
is either served by floe with the same method, path, operationId and path parameters, or listed in
`NOT_SERVED` with the reason; every difference in body shapes or error responses is listed below with
its reason too, so a new gap fails the suite.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog.api.app import build_litestar
from catalog.api.openapi import OPENAPI_PATH, render_openapi
from catalog.settings import Settings

SPEC_PATH = Path(__file__).resolve().parents[2] / "openapi" / "iceberg-rest-catalog-open-api.yaml"

# Spec operations floe does not serve, with the reason. Remove an entry when its route arrives.
NOT_SERVED: dict[str, str] = {
    "planTableScan": "server-side scan planning is not implemented: clients plan scans themselves",
    "fetchPlanningResult": "server-side scan planning is not implemented: clients plan scans themselves",
    "cancelPlanning": "server-side scan planning is not implemented: clients plan scans themselves",
    "fetchScanTasks": "server-side scan planning is not implemented: clients plan scans themselves",
    "signRequest": "remote S3 request signing is not offered: floe vends storage credentials instead",
    "listFunctions": "floe has no function catalog",
    "loadFunction": "floe has no function catalog",
}

# Routes floe serves outside the Iceberg REST API (and outside its OpenAPI document), with the reason.
FLOE_EXTENSIONS: dict[str, str] = {
    "/healthz": "liveness probe",
    "/readyz": "readiness probe: checks the database",
    "/metrics": "Prometheus metrics",
}
# floe's management API (clusters, API keys, audit): documented, but not part of the Iceberg REST spec.
MANAGEMENT_PREFIX = "/management/v1/"
MANAGEMENT_OPERATIONS = frozenset(
    {
        "createCluster", "listClusters", "getCluster", "deleteCluster", "createKey", "listKeys", "revokeKey",
        "rotateKey", "rotateSigningKey", "listAudit",
        "applyPipeline", "getPipeline", "getKafkaOffsets",
        "getSnapshotAtKafkaPosition", "getWatermark", "reportEndOffsets",
        "recordMaintenancePass", "listMaintenancePasses", "renewLease", "endLease",
    }
)  # fmt: skip
# Litestar serves the OpenAPI document itself (JSON, YAML and viewers) under this path.
OPENAPI_ROUTES_PREFIX = "/openapi"
# The web console (catalog/console): HTML pages for browsers, not an API; left out of the document.
CONSOLE_ROUTES_PREFIX = "/console"

# Spec schema properties floe's schemas leave out, with the reason.
PROPERTIES_NOT_OFFERED: dict[tuple[str, str], str] = {
    (
        "OAuthTokenResponse",
        "refresh_token",
    ): "client-credentials grants get no refresh token (RFC 6749 §4.4.3); clients refresh by token exchange",
    ("LoadTableResult", "remote-signing-config"): "floe never offers remote signing: it vends credentials "
    "in `storage-credentials` and `config`",
}

# Operations whose success response differs from the spec's, with the reason.
SUCCESS_RESPONSE_DIFFERENCES: dict[str, str] = {}

# Spec query parameters floe accepts but does not read, with the reason.
QUERY_PARAMETERS_NOT_READ: dict[tuple[str, str], str] = {
    ("loadTable", "referenced-by"): "no per-view access control: loading through a view changes nothing",
    ("loadView", "referenced-by"): "no per-view access control: loading through a view changes nothing",
    ("loadCredentials", "referenced-by"): "no per-view access control: loading through a view changes "
    "nothing",
    ("loadCredentials", "planId"): "no server-side scan planning, so there are no plans to scope credentials",
}

# Error statuses that must be documented exactly as in the spec, each with an `IcebergErrorResponse`.
ERROR_STATUSES = frozenset({"400", "401", "403", "404", "409", "503"})
# Server-side statuses: documented explicitly or through the `5XX` range.
SERVER_ERROR_STATUSES = frozenset({"500", "502", "504", "5XX"})
# Spec error statuses floe never sends, with the reason.
ERROR_STATUSES_NOT_SENT: dict[str, str] = {
    "406": "every operation floe serves is supported; unsupported routes are absent from the config "
    "`endpoints` instead",
    "419": "optional in the spec: floe answers an expired token with 401, which the spec prefers",
    "422": "a property both removed and updated is a 400 BadRequestException, as in the Java reference "
    "server (floe does document 422 for a reused Idempotency-Key)",
}

HTTP_METHODS = ("get", "put", "post", "delete", "head", "patch")
JSON = "application/json"


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str
    path_parameters: frozenset[str]
    query_parameters: frozenset[str]
    body: dict[str, Any]

    @property
    def endpoint(self) -> str:
        """The `<HTTP verb> <path>` form of the config `endpoints` list."""
        return f"{self.method} {self.path}"


def resolve(document: dict[str, Any], node: Any) -> Any:
    """Follow local `$ref`s until a node that is not a reference."""
    while isinstance(node, dict) and "$ref" in node:
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def ref_name(node: Any) -> str | None:
    if isinstance(node, dict) and "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    return None


def operations(document: dict[str, Any], *, management: bool = False) -> dict[str, Operation]:
    """Every Iceberg REST operation of an OpenAPI document, by operationId (with `management`, floe's
    management API operations too)."""
    found: dict[str, Operation] = {}
    for path, item in document["paths"].items():
        if path.startswith(MANAGEMENT_PREFIX) and not management:
            continue
        shared = item.get("parameters", [])
        for method in HTTP_METHODS:
            if method not in item:
                continue
            body = item[method]
            parameters = [resolve(document, p) for p in [*shared, *body.get("parameters", [])]]
            operation = Operation(
                operation_id=body["operationId"],
                method=method.upper(),
                path=path,
                path_parameters=frozenset(p["name"] for p in parameters if p["in"] == "path"),
                query_parameters=frozenset(p["name"] for p in parameters if p["in"] == "query"),
                body=body,
            )
            assert operation.operation_id not in found, f"duplicate operationId {operation.operation_id}"
            found[operation.operation_id] = operation
    return found


def responses(operation: Operation) -> dict[str, Any]:
    """The operation's responses with string status keys (YAML reads `200:` as an integer)."""
    return {str(status): response for status, response in operation.body.get("responses", {}).items()}


def success_status(operation: Operation) -> str:
    return min(status for status in responses(operation) if status.startswith("2"))


def body_schema(document: dict[str, Any], holder: Any) -> Any:
    """The JSON schema of a request body or response, or None when it has no JSON body."""
    holder = resolve(document, holder)
    if not isinstance(holder, dict):
        return None
    return holder.get("content", {}).get(JSON, {}).get("schema")


def property_names(document: dict[str, Any], schema: Any) -> set[str]:
    """Properties of an object schema, including those of its `allOf`/`anyOf`/`oneOf` parts."""
    schema = resolve(document, schema)
    names = set(schema.get("properties", {}))
    for combinator in ("allOf", "anyOf", "oneOf"):
        for part in schema.get(combinator, []):
            names |= property_names(document, part)
    return names


def required_names(document: dict[str, Any], schema: Any) -> set[str]:
    """Properties an object must have (its own and its `allOf` parts'; `anyOf` branches vary)."""
    schema = resolve(document, schema)
    names = set(schema.get("required", []))
    for part in schema.get("allOf", []):
        names |= required_names(document, part)
    return names


def referenced_schemas(document: dict[str, Any], node: Any, seen: set[str] | None = None) -> set[str]:
    """Names of the component schemas `node` uses, directly or through other schemas."""
    seen = set() if seen is None else seen
    if isinstance(node, dict):
        name = ref_name(node)
        if name is not None and str(node["$ref"]).startswith("#/components/schemas/"):
            if name not in seen:
                seen.add(name)
                referenced_schemas(document, document["components"]["schemas"][name], seen)
        elif name is not None:
            referenced_schemas(document, resolve(document, node), seen)
        for value in node.values():
            referenced_schemas(document, value, seen)
    elif isinstance(node, list):
        for item in node:
            referenced_schemas(document, item, seen)
    return seen


@cache
def spec_document() -> dict[str, Any]:
    assert SPEC_PATH.is_file(), f"the reference spec is missing: {SPEC_PATH}"
    loaded: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
    return loaded


@cache
def floe_document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(render_openapi())
    return loaded


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return spec_document()


@pytest.fixture(scope="module")
def floe() -> dict[str, Any]:
    return floe_document()


def served_pairs() -> Iterator[tuple[Operation, Operation]]:
    """(spec operation, floe operation) for every spec operation floe serves."""
    floe_ops = operations(floe_document())
    for operation_id, spec_op in operations(spec_document()).items():
        if operation_id in floe_ops:
            yield spec_op, floe_ops[operation_id]


# (a) The committed document is current.


def test_committed_document_is_current() -> None:
    assert OPENAPI_PATH.is_file(), "openapi/floe.json is missing: run `floe openapi -o openapi/floe.json`"
    committed = OPENAPI_PATH.read_text(encoding="utf-8")
    assert render_openapi() == committed, (
        "openapi/floe.json is stale: run `floe openapi -o openapi/floe.json` and commit it"
    )


# (b) Operations: every spec operation is served or explained, and floe serves nothing else.


def test_every_spec_operation_is_served_or_explained(spec: dict[str, Any], floe: dict[str, Any]) -> None:
    floe_ops = operations(floe)
    floe_endpoints = {op.endpoint for op in floe_ops.values()}
    problems = []
    for operation_id, spec_op in operations(spec).items():
        if operation_id in NOT_SERVED:
            if operation_id in floe_ops or spec_op.endpoint in floe_endpoints:
                problems.append(f"{operation_id} is served now: remove it from NOT_SERVED")
            continue
        served = floe_ops.get(operation_id)
        if served is None:
            problems.append(f"{operation_id} ({spec_op.endpoint}) is neither served nor in NOT_SERVED")
            continue
        if served.endpoint != spec_op.endpoint:
            problems.append(f"{operation_id}: floe serves {served.endpoint}, the spec {spec_op.endpoint}")
        if served.path_parameters != spec_op.path_parameters:
            problems.append(
                f"{operation_id}: path parameters {sorted(served.path_parameters)} "
                f"!= spec {sorted(spec_op.path_parameters)}"
            )
    assert not problems, "\n".join(problems)


def test_not_served_entries_are_spec_operations_with_reasons(spec: dict[str, Any]) -> None:
    spec_ops = operations(spec)
    for operation_id, reason in NOT_SERVED.items():
        assert operation_id in spec_ops, f"NOT_SERVED lists {operation_id}, which the spec does not have"
        assert len(reason) > 20, f"NOT_SERVED[{operation_id}] needs a real reason"


def test_floe_documents_only_spec_operations(spec: dict[str, Any], floe: dict[str, Any]) -> None:
    spec_by_endpoint = {op.endpoint: op for op in operations(spec).values()}
    for operation_id, op in operations(floe).items():
        assert op.endpoint in spec_by_endpoint, f"floe documents {op.endpoint}, which the spec does not have"
        assert spec_by_endpoint[op.endpoint].operation_id == operation_id


def test_every_served_route_is_documented_or_an_extension(floe: dict[str, Any]) -> None:
    """Routes of the real app, not just the document: nothing undocumented slips in."""
    app = build_litestar(Settings.from_env({"FLOE_HOME": "/nonexistent-floe-home"}))
    documented = {op.endpoint for op in operations(floe, management=True).values()}
    undocumented = set()
    for route in app.routes:
        path = route.path_format
        if path in FLOE_EXTENSIONS or path.startswith((OPENAPI_ROUTES_PREFIX, CONSOLE_ROUTES_PREFIX)):
            continue
        for method in route.methods:
            if method != "OPTIONS" and f"{method} {path}" not in documented:
                undocumented.add(f"{method} {path}")
    assert not undocumented, f"served but neither documented nor a floe extension: {sorted(undocumented)}"


def test_management_api_is_documented(floe: dict[str, Any]) -> None:
    documented = {
        op.operation_id
        for op in operations(floe, management=True).values()
        if op.path.startswith(MANAGEMENT_PREFIX)
    }
    assert documented == MANAGEMENT_OPERATIONS


def test_extensions_are_not_in_the_document(floe: dict[str, Any]) -> None:
    for path in FLOE_EXTENSIONS:
        assert path not in floe["paths"], f"{path} is a floe extension: keep it out of the document"


def test_spec_query_parameters_are_read(spec: dict[str, Any], floe: dict[str, Any]) -> None:
    problems = []
    for spec_op, floe_op in served_pairs():
        for name in sorted(spec_op.query_parameters - floe_op.query_parameters):
            if (spec_op.operation_id, name) not in QUERY_PARAMETERS_NOT_READ:
                problems.append(f"{spec_op.operation_id}: query parameter {name} is not read")
        for name in sorted(floe_op.query_parameters - spec_op.query_parameters):
            problems.append(f"{spec_op.operation_id}: query parameter {name} is not in the spec")
    floe_ops = operations(floe)
    for (operation_id, name), reason in QUERY_PARAMETERS_NOT_READ.items():
        assert operation_id in floe_ops, f"QUERY_PARAMETERS_NOT_READ lists {operation_id}, not served"
        assert name not in floe_ops[operation_id].query_parameters, (
            f"{operation_id} reads {name} now: remove it from QUERY_PARAMETERS_NOT_READ ({reason})"
        )
    assert not problems, "\n".join(problems)


# Error responses.


def test_spec_error_responses_are_documented(spec: dict[str, Any], floe: dict[str, Any]) -> None:
    problems = []
    for spec_op, floe_op in served_pairs():
        floe_responses = responses(floe_op)
        for status in responses(spec_op):
            if status[0] in "23":
                # Success responses that differ on purpose are checked by the success-response test.
                documented_difference = spec_op.operation_id in SUCCESS_RESPONSE_DIFFERENCES
                if status not in floe_responses and not documented_difference:
                    problems.append(f"{spec_op.operation_id}: response {status} is not documented")
            elif status in ERROR_STATUSES:
                if status not in floe_responses:
                    problems.append(f"{spec_op.operation_id}: error {status} is not documented")
            elif status in SERVER_ERROR_STATUSES:
                if status not in floe_responses and "5XX" not in floe_responses:
                    problems.append(f"{spec_op.operation_id}: server error {status} is not documented")
            else:
                assert status in ERROR_STATUSES_NOT_SENT, (
                    f"{spec_op.operation_id}: the spec's error {status} is neither required here nor "
                    "explained in ERROR_STATUSES_NOT_SENT"
                )
    assert not problems, "\n".join(problems)


def test_every_error_response_is_an_iceberg_error(floe: dict[str, Any]) -> None:
    """…except the token endpoint's, which are OAuth2 errors (RFC 6749) as in the spec."""
    for operation_id, op in operations(floe, management=True).items():
        expected = "OAuthError" if operation_id == "getToken" else "IcebergErrorResponse"
        for status, response in responses(op).items():
            if status[0] in "45":
                schema = body_schema(floe, response)
                assert ref_name(schema) == expected, f"{operation_id} {status}: {schema}"


def test_error_schemas_match_the_spec(spec: dict[str, Any], floe: dict[str, Any]) -> None:
    for name in ("IcebergErrorResponse", "ErrorModel"):
        floe_schema = floe["components"]["schemas"][name]
        spec_schema = spec["components"]["schemas"][name]
        assert property_names(floe, floe_schema) == property_names(spec, spec_schema)
        assert required_names(floe, floe_schema) == required_names(spec, spec_schema)


# (c) Request and response bodies.


def test_request_bodies_match_the_spec(spec: dict[str, Any], floe: dict[str, Any]) -> None:
    problems = []
    for spec_op, floe_op in served_pairs():
        spec_body = spec_op.body.get("requestBody")
        floe_body = floe_op.body.get("requestBody")
        if spec_body is None or floe_body is None:
            if (spec_body is None) != (floe_body is None):
                problems.append(f"{spec_op.operation_id}: request body presence differs from the spec")
            continue
        spec_schema = body_schema(spec, spec_body)
        floe_schema = body_schema(floe, floe_body)
        if ref_name(floe_schema) != ref_name(spec_schema):
            problems.append(
                f"{spec_op.operation_id}: request schema {ref_name(floe_schema)} != {ref_name(spec_schema)}"
            )
    assert not problems, "\n".join(problems)


def test_success_responses_match_the_spec(spec: dict[str, Any], floe: dict[str, Any]) -> None:
    problems = []
    for spec_op, floe_op in served_pairs():
        spec_status, floe_status = success_status(spec_op), success_status(floe_op)
        spec_schema = body_schema(spec, responses(spec_op)[spec_status])
        floe_schema = body_schema(floe, responses(floe_op)[floe_status])
        differs = spec_status != floe_status or ref_name(spec_schema) != ref_name(floe_schema)
        if spec_op.operation_id in SUCCESS_RESPONSE_DIFFERENCES:
            assert differs, f"{spec_op.operation_id} matches now: remove it from SUCCESS_RESPONSE_DIFFERENCES"
        elif differs:
            problems.append(
                f"{spec_op.operation_id}: floe {floe_status} {ref_name(floe_schema)}, "
                f"spec {spec_status} {ref_name(spec_schema)}"
            )
    assert not problems, "\n".join(problems)


def schema_usage(floe: dict[str, Any]) -> tuple[set[str], set[str]]:
    """Component schemas floe reads in request bodies, and those it writes in success responses."""
    read: set[str] = set()
    written: set[str] = set()
    for op in operations(floe).values():
        if "requestBody" in op.body:
            read |= referenced_schemas(floe, op.body["requestBody"])
        for status, response in responses(op).items():
            if status.startswith("2"):
                written |= referenced_schemas(floe, response)
    return read, written


def management_only_schemas(floe: dict[str, Any]) -> set[str]:
    """Schemas only floe's management API uses (not Iceberg REST schemas)."""
    used: set[str] = set()
    for op in operations(floe, management=True).values():
        if not op.path.startswith(MANAGEMENT_PREFIX):
            continue
        if "requestBody" in op.body:
            used |= referenced_schemas(floe, op.body["requestBody"])
        for response in responses(op).values():
            used |= referenced_schemas(floe, response)
    read, written = schema_usage(floe)
    return used - read - written - {"IcebergErrorResponse", "ErrorModel"}


def test_schemas_have_the_spec_properties(spec: dict[str, Any], floe: dict[str, Any]) -> None:
    """Every schema floe defines is the spec's schema of that name, property for property.

    floe may not require what the spec makes optional in a request, and must always send what the spec
    requires in a response.
    """
    read, written = schema_usage(floe)
    spec_schemas = spec["components"]["schemas"]
    problems = []
    for name, floe_schema in sorted(floe["components"]["schemas"].items()):
        if name in management_only_schemas(floe):
            continue
        if name not in spec_schemas:
            problems.append(f"{name} is not a spec schema")
            continue
        floe_props = property_names(floe, floe_schema)
        spec_props = property_names(spec, spec_schemas[name])
        not_offered = {prop for (schema, prop) in PROPERTIES_NOT_OFFERED if schema == name}
        if missing := spec_props - floe_props - not_offered:
            problems.append(f"{name}: floe lacks {sorted(missing)}")
        if extra := floe_props - spec_props:
            problems.append(f"{name}: floe adds {sorted(extra)}")
        if stale := not_offered & floe_props:
            problems.append(f"{name}: floe offers {sorted(stale)} now: update PROPERTIES_NOT_OFFERED")
        floe_required = required_names(floe, floe_schema)
        spec_required = required_names(spec, spec_schemas[name])
        if name in read and (demanded := floe_required - spec_required):
            problems.append(f"{name}: floe requires {sorted(demanded)}, optional in the spec")
        if name in written and (omitted := spec_required - floe_required):
            problems.append(f"{name}: floe may omit {sorted(omitted)}, required by the spec")
    assert not problems, "\n".join(problems)


def test_documented_differences_name_real_schemas(spec: dict[str, Any]) -> None:
    for (schema, prop), reason in PROPERTIES_NOT_OFFERED.items():
        assert prop in property_names(spec, spec["components"]["schemas"][schema]), reason
    for operation_id in [*SUCCESS_RESPONSE_DIFFERENCES, *(op for op, _ in QUERY_PARAMETERS_NOT_READ)]:
        assert operation_id in operations(spec), operation_id
