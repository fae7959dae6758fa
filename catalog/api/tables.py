"""Table routes, including rename, metrics, credentials and multi-table transactions."""

from __future__ import annotations

import json
from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, head, post
from litestar.datastructures import ResponseHeader
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter

from catalog.api.audit import AUDIT_TARGETS_STATE_KEY, body_targets
from catalog.api.dependencies import page_size_value
from catalog.api.namespaces import PageSize, PageToken
from catalog.api.schemas import (
    CommitTableRequest,
    CommitTableResponse,
    CommitTransactionRequest,
    CreateTableRequest,
    ListTablesResponse,
    LoadCredentialsResponse,
    LoadTableResult,
    RegisterTableRequest,
    RenameTableRequest,
    ReportMetricsRequest,
    StorageCredential,
    UnregisterTableResult,
    to_json_dict,
)
from catalog.auth import Principal
from catalog.identifiers import Namespace, TableIdent, decode_segment, parse_name, parse_namespace
from catalog.redrive_audit import redrive_counts
from catalog.service.listing_cache import Listing
from catalog.service.table_model import LoadedTable, TableCreation, TableRegistration, parse_change
from catalog.service.tables import TableService

JSON = "application/json"


AccessDelegation = Annotated[
    str | None,
    Parameter(
        header="X-Iceberg-Access-Delegation",
        required=False,
        description="`vended-credentials`: answer with temporary storage credentials for the table "
        "(S3 warehouses with an STS role); comma-separated mechanisms",
    ),
]


def json_response(loaded: LoadedTable, status: int = 200) -> Response[bytes]:
    headers = {"ETag": loaded.etag} if loaded.etag else {}
    if loaded.storage_credentials:
        # Secrets inside: no shared cache may keep this response.
        headers["Cache-Control"] = "no-store"
    return Response(content=loaded.to_json(), status_code=status, media_type=JSON, headers=headers or None)


# The response model of listTables and listViews (their routes send the service's rendered JSON).
LISTING_RESULT = ResponseSpec(
    data_container=ListTablesResponse, description="Request fulfilled, document follows"
)


def listing_response(listing: Listing) -> Response[bytes]:
    """A listTables/listViews page: its JSON (`ListTablesResponse`) rendered once per namespace
    listing version by the service."""
    return Response(content=listing.body, media_type=JSON)


def ident_of(namespace: str, table: str) -> TableIdent:
    return TableIdent(parse_namespace(namespace), parse_name(table))


class TableController(Controller):
    path = "/v1/{prefix:str}/namespaces/{namespace:str}"
    tags = ["Catalog API"]

    @get(
        "/tables",
        operation_id="listTables",
        responses={200: LISTING_RESULT},
    )
    async def list_tables(
        self,
        prefix: str,
        namespace: str,
        principal: Principal,
        tables: TableService,
        page_token: PageToken = None,
        page_size: PageSize = None,
    ) -> Response[bytes]:
        listing = await tables.list_tables(
            principal,
            decode_segment(prefix),
            parse_namespace(namespace),
            page_token,
            page_size_value(page_size),
        )
        return listing_response(listing)

    @post(
        "/tables",
        operation_id="createTable",
        status_code=200,
        responses={
            200: ResponseSpec(
                data_container=LoadTableResult, description="Table metadata result after creating a table"
            )
        },
    )
    async def create_table(
        self,
        prefix: str,
        namespace: str,
        principal: Principal,
        tables: TableService,
        data: CreateTableRequest,
        access_delegation: AccessDelegation = None,
    ) -> Response[bytes]:
        request = TableCreation(
            name=data.name,
            schema=data.schema,
            location=data.location,
            partition_spec=data.partition_spec,
            write_order=data.write_order,
            properties=data.properties or {},
            stage_create=bool(data.stage_create),
        )
        loaded = await tables.create(
            principal, decode_segment(prefix), parse_namespace(namespace), request, access_delegation
        )
        return json_response(loaded)

    @post(
        "/register",
        operation_id="registerTable",
        status_code=200,
        responses={200: ResponseSpec(data_container=LoadTableResult, description="Table metadata result")},
    )
    async def register_table(
        self,
        prefix: str,
        namespace: str,
        principal: Principal,
        tables: TableService,
        data: RegisterTableRequest,
    ) -> Response[bytes]:
        request = TableRegistration(data.name, data.metadata_location, bool(data.overwrite))
        loaded = await tables.register(principal, decode_segment(prefix), parse_namespace(namespace), request)
        return json_response(loaded)

    @get(
        "/tables/{table:str}",
        operation_id="loadTable",
        responses={
            200: ResponseSpec(
                data_container=LoadTableResult, description="Table metadata result when loading a table"
            ),
            304: ResponseSpec(
                data_container=None, description="Not Modified: the ETag in If-None-Match is current"
            ),
        },
        response_headers=[
            ResponseHeader(
                name="ETag",
                description="Identifies this version of the table metadata",
                documentation_only=True,
            )
        ],
    )
    async def load_table(
        self,
        prefix: str,
        namespace: str,
        table: str,
        principal: Principal,
        tables: TableService,
        snapshots: str = "all",
        if_none_match: Annotated[str | None, Parameter(header="If-None-Match", required=False)] = None,
        access_delegation: AccessDelegation = None,
    ) -> Response[bytes]:
        loaded = await tables.load(
            principal,
            decode_segment(prefix),
            ident_of(namespace, table),
            snapshots,
            if_none_match,
            access_delegation,
        )
        if loaded is None:
            return Response(content=b"", status_code=304, headers={"ETag": if_none_match or ""})
        return json_response(loaded)

    @post(
        "/tables/{table:str}",
        operation_id="updateTable",
        status_code=200,
        responses={
            200: ResponseSpec(
                data_container=CommitTableResponse,
                description="Response used when a table is successfully updated",
            )
        },
    )
    async def update_table(
        self,
        prefix: str,
        namespace: str,
        table: str,
        principal: Principal,
        tables: TableService,
        data: CommitTableRequest,
    ) -> Response[bytes]:
        limits = tables.limits
        change = parse_change(to_json_dict(data), ident_of(namespace, table), limits)
        loaded = await tables.commit(principal, decode_segment(prefix), change)
        return json_response(loaded)

    @delete("/tables/{table:str}", operation_id="dropTable", status_code=204)
    async def drop_table(
        self,
        prefix: str,
        namespace: str,
        table: str,
        principal: Principal,
        tables: TableService,
        purge_requested: Annotated[bool, Parameter(query="purgeRequested", required=False)] = False,
    ) -> None:
        await tables.drop(principal, decode_segment(prefix), ident_of(namespace, table), purge_requested)

    @head("/tables/{table:str}", operation_id="tableExists", status_code=204)
    async def table_exists(
        self, prefix: str, namespace: str, table: str, principal: Principal, tables: TableService
    ) -> None:
        await tables.exists(principal, decode_segment(prefix), ident_of(namespace, table))

    @post(
        "/tables/{table:str}/unregister",
        operation_id="unregisterTable",
        status_code=200,
        responses={
            200: ResponseSpec(
                data_container=UnregisterTableResult,
                description="Response when a table is successfully unregistered.",
            )
        },
    )
    async def unregister_table(
        self, prefix: str, namespace: str, table: str, principal: Principal, tables: TableService
    ) -> Response[bytes]:
        dropped = await tables.unregister(principal, decode_segment(prefix), ident_of(namespace, table))
        location = json.dumps(dropped.metadata_location)
        body = f'{{"metadata-location":{location},"metadata":{dropped.metadata_json}}}'
        return Response(content=body.encode(), status_code=200, media_type=JSON)

    @get("/tables/{table:str}/credentials", operation_id="loadCredentials")
    async def load_credentials(
        self, prefix: str, namespace: str, table: str, principal: Principal, tables: TableService
    ) -> LoadCredentialsResponse:
        creds = await tables.credentials(principal, decode_segment(prefix), ident_of(namespace, table))
        return LoadCredentialsResponse(
            storage_credentials=[StorageCredential(prefix=c.prefix, config=c.config) for c in creds]
        )

    @post("/tables/{table:str}/metrics", operation_id="reportMetrics", status_code=204)
    async def report_metrics(
        self,
        prefix: str,
        namespace: str,
        table: str,
        principal: Principal,
        tables: TableService,
        data: ReportMetricsRequest,
    ) -> None:
        body = to_json_dict(data)
        await tables.report_metrics(principal, decode_segment(prefix), ident_of(namespace, table), body)


class TableOperationsController(Controller):
    path = "/v1/{prefix:str}"
    tags = ["Catalog API"]

    @post("/tables/rename", operation_id="renameTable", status_code=204)
    async def rename_table(
        self, prefix: str, principal: Principal, tables: TableService, data: RenameTableRequest
    ) -> None:
        await tables.rename(
            principal,
            decode_segment(prefix),
            TableIdent(Namespace.of(data.source.namespace), data.source.name),
            TableIdent(Namespace.of(data.destination.namespace), data.destination.name),
        )

    @post("/transactions/commit", operation_id="commitTransaction", status_code=204)
    async def commit_transaction(
        self,
        request: Request[Any, Any, Any],
        prefix: str,
        principal: Principal,
        tables: TableService,
        data: CommitTransactionRequest,
    ) -> None:
        limits = tables.limits
        limits.check_transaction(len(data.table_changes))
        changes = [parse_change(change, None, limits) for change in data.table_changes]
        # The audit entry names the tables (they are in the body, not the path).
        targets = body_targets("tables", [str(c.ident) for c in changes])
        # A dead-letter redrive's counts (catalog/redrive_audit.py) join its entry.
        redrive = redrive_counts(u for c in changes for u in c.updates)
        request.state[AUDIT_TARGETS_STATE_KEY] = f"{targets} {redrive}" if redrive else targets
        await tables.commit_all(principal, decode_segment(prefix), changes)
