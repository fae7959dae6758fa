"""View routes."""

from __future__ import annotations

import msgspec
from litestar import Controller, Response, delete, get, head, post
from litestar.openapi.datastructures import ResponseSpec

from catalog.api.dependencies import page_size_value
from catalog.api.namespaces import PageSize, PageToken
from catalog.api.schemas import (
    CommitViewRequest,
    CreateViewRequest,
    LoadViewResult,
    RegisterViewRequest,
    RenameTableRequest,
)
from catalog.api.tables import LISTING_RESULT, ident_of, json_response, listing_response
from catalog.auth import Principal
from catalog.identifiers import Namespace, TableIdent, decode_segment, parse_namespace
from catalog.service.views import ViewChange, ViewCreation, ViewRegistration, ViewService

_VIEW_RESULT = ResponseSpec(data_container=LoadViewResult, description="View metadata result")


class ViewController(Controller):
    path = "/v1/{prefix:str}/namespaces/{namespace:str}"
    tags = ["Catalog API"]

    @get("/views", operation_id="listViews", responses={200: LISTING_RESULT})
    async def list_views(
        self,
        prefix: str,
        namespace: str,
        principal: Principal,
        views: ViewService,
        page_token: PageToken = None,
        page_size: PageSize = None,
    ) -> Response[bytes]:
        listing = await views.list_views(
            principal,
            decode_segment(prefix),
            parse_namespace(namespace),
            page_token,
            page_size_value(page_size),
        )
        return listing_response(listing)

    @post("/views", operation_id="createView", status_code=200, responses={200: _VIEW_RESULT})
    async def create_view(
        self, prefix: str, namespace: str, principal: Principal, views: ViewService, data: CreateViewRequest
    ) -> Response[bytes]:
        request = ViewCreation(data.name, data.schema, data.view_version, data.properties, data.location)
        loaded = await views.create(principal, decode_segment(prefix), parse_namespace(namespace), request)
        return json_response(loaded)

    @get("/views/{view:str}", operation_id="loadView", responses={200: _VIEW_RESULT})
    async def load_view(
        self, prefix: str, namespace: str, view: str, principal: Principal, views: ViewService
    ) -> Response[bytes]:
        return json_response(await views.load(principal, decode_segment(prefix), ident_of(namespace, view)))

    @post("/views/{view:str}", operation_id="replaceView", status_code=200, responses={200: _VIEW_RESULT})
    async def replace_view(
        self,
        prefix: str,
        namespace: str,
        view: str,
        principal: Principal,
        views: ViewService,
        data: CommitViewRequest,
    ) -> Response[bytes]:
        change = ViewChange(
            updates=msgspec.to_builtins(data.updates),
            requirements=msgspec.to_builtins(data.requirements) if data.requirements is not None else None,
        )
        loaded = await views.replace(principal, decode_segment(prefix), ident_of(namespace, view), change)
        return json_response(loaded)

    @delete("/views/{view:str}", operation_id="dropView", status_code=204)
    async def drop_view(
        self, prefix: str, namespace: str, view: str, principal: Principal, views: ViewService
    ) -> None:
        await views.drop(principal, decode_segment(prefix), ident_of(namespace, view))

    @head("/views/{view:str}", operation_id="viewExists", status_code=204)
    async def view_exists(
        self, prefix: str, namespace: str, view: str, principal: Principal, views: ViewService
    ) -> None:
        await views.exists(principal, decode_segment(prefix), ident_of(namespace, view))

    @post("/register-view", operation_id="registerView", status_code=200, responses={200: _VIEW_RESULT})
    async def register_view(
        self, prefix: str, namespace: str, principal: Principal, views: ViewService, data: RegisterViewRequest
    ) -> Response[bytes]:
        request = ViewRegistration(data.name, data.metadata_location)
        loaded = await views.register(principal, decode_segment(prefix), parse_namespace(namespace), request)
        return json_response(loaded)


class ViewOperationsController(Controller):
    path = "/v1/{prefix:str}"
    tags = ["Catalog API"]

    @post("/views/rename", operation_id="renameView", status_code=204)
    async def rename_view(
        self, prefix: str, principal: Principal, views: ViewService, data: RenameTableRequest
    ) -> None:
        await views.rename(
            principal,
            decode_segment(prefix),
            TableIdent(Namespace.of(data.source.namespace), data.source.name),
            TableIdent(Namespace.of(data.destination.namespace), data.destination.name),
        )
