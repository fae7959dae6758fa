"""loadTable, listTables, listViews and token requests as plain handlers of the request pipeline
(`catalog.api.pipeline`), without Litestar's routing, parameter parsing, dependency injection and
response building.

Engines load a table before nearly every query, so a loadTable (or its 304) should cost little more than
the version check in the database; a listing of a namespace served from the cache costs the same one
indexed read. Litestar's machinery costs a multiple of that (profiled:
benchmarks/results/catalog-hot-path.md). `match` recognises
`GET /v1/{prefix}/namespaces/{namespace}/tables/{table}` (with at most a `snapshots` parameter),
`GET /v1/{prefix}/namespaces/{namespace}/tables` and `…/views` (with at most `pageToken` and a decimal
`pageSize`) and `POST /v1/oauth/tokens` with a form body (engines ask for a token before most queries:
Trino 476 two per SELECT). The handlers call the same services as the Litestar routes; the pipeline
runs the same steps before them (request id, metrics, access line, body limit, authentication,
audit) as before Litestar's routes, for the same operations of its route table. Any other request goes
to Litestar, which also keeps serving these routes for the OpenAPI document and for the requests
`match` does not take.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.types import Receive, Scope

from catalog.api.audit import TOKEN_CLIENT_STATE_KEY
from catalog.api.dependencies import page_size_value
from catalog.api.errors import TOKEN_PATH, Answer, encode_headers, token_failure
from catalog.api.oauth import answer_token_request, granted_answer, parse_token_form
from catalog.api.tables import ident_of
from catalog.auth import Principal
from catalog.identifiers import decode_segment, parse_namespace
from catalog.storage import STORAGE_ENDPOINT_HEADER, parse_storage_endpoint

# What Litestar puts in `scope["path_template"]` for the routes (the access log and metrics label).
LOAD_TABLE_TEMPLATE = "/v1/{prefix:str}/namespaces/{namespace:str}/tables/{table:str}"
LIST_TEMPLATES = {
    b"tables": "/v1/{prefix:str}/namespaces/{namespace:str}/tables",
    b"views": "/v1/{prefix:str}/namespaces/{namespace:str}/views",
}
MAX_PAGE_SIZE_DIGITS = 18
FORM_MEDIA_TYPE = "application/x-www-form-urlencoded"
STORAGE_ENDPOINT_HEADER_BYTES = STORAGE_ENDPOINT_HEADER.lower().encode("latin-1")


def _tables_path(scope: Scope) -> tuple[bytes, list[str]] | None:
    """(`tables` or `views`, [prefix, namespace] or [prefix, namespace, table], still percent-encoded)
    of a GET of `/v1/{prefix}/namespaces/{namespace}/tables[/{table}]` or `…/{namespace}/views`."""
    if scope["type"] != ScopeType.HTTP or scope["method"] != "GET":
        return None
    raw = scope.get("raw_path") or scope["path"].encode("latin-1")
    parts = raw.split(b"?", 1)[0].split(b"/")
    if len(parts) not in (6, 7) or parts[1] != b"v1" or parts[3] != b"namespaces":
        return None
    if parts[5] != b"tables" and not (parts[5] == b"views" and len(parts) == 6):
        return None
    segments = [parts[2], parts[4], *parts[6:]]
    if not all(segments):
        return None
    return parts[5], [segment.decode("latin-1") for segment in segments]


def _page_parameters(query_string: bytes) -> tuple[str | None, int | None] | None:
    """(pageToken, pageSize) of a listing, or None for any other query (Litestar's, which also answers
    a `pageSize` that is not a plain decimal number)."""
    if not query_string:
        return None, None
    found: dict[str, str] = {}
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if name not in ("pageToken", "pageSize") or name in found:
            return None
        found[name] = value
    size = found.get("pageSize")
    # Longer numbers too (Python refuses to parse thousands of digits): all are out of range anyway.
    if size is not None and not (size.isascii() and size.isdigit() and len(size) <= MAX_PAGE_SIZE_DIGITS):
        return None
    return found.get("pageToken"), int(size) if size is not None else None


def _snapshots_mode(query_string: bytes) -> str | None:
    """The `snapshots` parameter ("all" when absent), or None for any other query (Litestar's)."""
    if not query_string:
        return "all"
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    if len(pairs) != 1 or pairs[0][0] != "snapshots":
        return None
    return pairs[0][1]


def _is_token_form_post(scope: Scope) -> bool:
    """A `POST /v1/oauth/tokens` with a form body (without a query: anything else is Litestar's)."""
    if scope["type"] != ScopeType.HTTP or scope["method"] != "POST":
        return False
    if (scope.get("raw_path") or scope["path"].encode("latin-1")) != TOKEN_PATH.encode():
        return False
    for key, value in scope["headers"]:
        if key.lower() == b"content-type":
            media_type = value.split(b";", 1)[0].strip().lower()
            return media_type == FORM_MEDIA_TYPE.encode()
    return False


async def _read_body(receive: Receive) -> bytes | None:
    """The request body, or None when the client left. Its length is bounded by the pipeline's limits
    step (`catalog.api.body_limits`): the token operation's `MAX_TOKEN_REQUEST_BYTES`."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


# A hot route's handler: the state of the app, the request's scope and receive, and its authenticated
# caller (None on the token endpoint); the answer, or None when the client left before asking.
# The pipeline answers a failure it raises.
Handler = Callable[[State, Scope, Receive, Principal | None], Awaitable[Answer | None]]


# eq=False: hashed by identity, a C-level lookup of its compiled steps per request
@dataclass(frozen=True, slots=True, eq=False)
class HotRoute:
    """A hot route's handler; its operation (authentication, audit) is the route table's for
    `method` on `template` (`catalog.api.routing`)."""

    handler: Handler
    template: str  # what Litestar puts in `scope["path_template"]` for the route (metrics, access log)
    method: str


def match(scope: Scope) -> HotRoute | None:
    """The hot route that answers the request (with `path_template` and `path_params` set), or None
    when it is Litestar's."""
    if _is_token_form_post(scope):
        scope["path_template"] = TOKEN_PATH
        scope["path_params"] = {}
        return TOKEN_ROUTE
    path = _tables_path(scope)
    if path is None:
        return None
    collection, segments = path
    query = scope.get("query_string", b"")
    if len(segments) == 3 and _snapshots_mode(query) is not None:
        scope["path_template"] = LOAD_TABLE_TEMPLATE
        scope["path_params"] = dict(zip(("prefix", "namespace", "table"), segments, strict=True))
        return LOAD_TABLE_ROUTE
    if len(segments) == 2 and _page_parameters(query) is not None:
        route = LIST_ROUTES[collection]
        scope["path_template"] = route.template
        scope["path_params"] = dict(zip(("prefix", "namespace"), segments, strict=True))
        return route
    return None


async def _list(state: State, scope: Scope, receive: Receive, principal: Principal | None) -> Answer:
    """listTables and listViews."""
    assert principal is not None  # an authenticated route
    params = scope["path_params"]
    page = _page_parameters(scope.get("query_string", b""))
    assert page is not None  # checked before routing here
    ctx = state.components
    # In the order the Litestar routes evaluate them, so both answer a bad request alike (a failure is
    # raised to the pipeline, which answers it as every failure is answered).
    prefix, namespace = decode_segment(params["prefix"]), parse_namespace(params["namespace"])
    page_token, page_size = page[0], page_size_value(page[1])
    if scope["path_template"] == LIST_TEMPLATES[b"views"]:
        listing = await ctx.views["client"].list_views(principal, prefix, namespace, page_token, page_size)
    else:
        listing = await ctx.tables["client"].list_tables(principal, prefix, namespace, page_token, page_size)
    return 200, listing.body, [], True


async def _token(state: State, scope: Scope, receive: Receive, principal: Principal | None) -> Answer | None:
    """A client-credentials (or token exchange) request with a form body; audited by the pipeline."""
    authorization = b""
    for key, value in scope["headers"]:
        if key.lower() == b"authorization":
            authorization = value
    client = scope.get("client")
    source = client[0] if client else "unknown"
    request_state = scope.setdefault("state", {})
    try:
        body = await _read_body(receive)
        if body is None:
            return None  # the client left: nobody to answer, nothing was asked
        # Engines repeat the same request before most queries: one granted a moment ago is
        # answered from the key state it was checked against.
        digest = hashlib.sha256(authorization + b"\n" + body).digest()
        repeated = await state.auth.repeated_grant(digest, source)
        if repeated is not None:
            token, token_scope, request_state[TOKEN_CLIENT_STATE_KEY] = repeated
            status, answer, headers = granted_answer(token, token_scope)
        else:
            status, answer, headers = await answer_token_request(
                state.auth,
                parse_token_form(body),
                authorization.decode("latin-1") or None,
                source,
                request_state,
                remember_as=digest,
            )
    except Exception as exc:  # answered as the Litestar route would, and audited alike
        status, answer, headers = token_failure(exc, "POST", TOKEN_PATH)
    return status, answer, encode_headers(headers), True


async def _load_table(state: State, scope: Scope, receive: Receive, principal: Principal | None) -> Answer:
    """loadTable (a 304 when `If-None-Match` names the current version)."""
    assert principal is not None  # an authenticated route
    params = scope["path_params"]
    if_none_match = access_delegation = storage_endpoint = None
    for key, value in scope["headers"]:
        name = key.lower()
        if name == b"if-none-match":
            if_none_match = value.decode("latin-1")
        elif name == b"x-iceberg-access-delegation":
            access_delegation = value.decode("latin-1")
        elif name == STORAGE_ENDPOINT_HEADER_BYTES:
            storage_endpoint = value.decode("latin-1")
    # A failure is raised to the pipeline, which answers it as every failure is answered.
    service = state.components.tables[parse_storage_endpoint(storage_endpoint)]
    loaded = await service.load(
        principal,
        decode_segment(params["prefix"]),
        ident_of(params["namespace"], params["table"]),
        _snapshots_mode(scope.get("query_string", b"")) or "all",
        if_none_match,
        access_delegation,
    )
    if loaded is None:
        return 304, b"", [(b"etag", (if_none_match or "").encode("latin-1"))], False
    headers = [(b"etag", loaded.etag.encode("latin-1"))] if loaded.etag else []
    if loaded.storage_credentials:
        # Secrets inside: no shared cache may keep this response.
        headers.append((b"cache-control", b"no-store"))
    return 200, loaded.to_json(), headers, True


TOKEN_ROUTE = HotRoute(_token, TOKEN_PATH, "POST")
LOAD_TABLE_ROUTE = HotRoute(_load_table, LOAD_TABLE_TEMPLATE, "GET")
LIST_ROUTES = {
    b"tables": HotRoute(_list, LIST_TEMPLATES[b"tables"], "GET"),
    b"views": HotRoute(_list, LIST_TEMPLATES[b"views"], "GET"),
}
HOT_ROUTES = (TOKEN_ROUTE, LOAD_TABLE_ROUTE, *LIST_ROUTES.values())
