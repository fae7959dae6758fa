"""Namespace routes."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get, head, post
from litestar.params import Parameter

from catalog.api.dependencies import page_size_value
from catalog.api.schemas import (
    CreateNamespaceRequest,
    CreateNamespaceResponse,
    GetNamespaceResponse,
    ListNamespacesResponse,
    UpdateNamespacePropertiesRequest,
    UpdateNamespacePropertiesResponse,
)
from catalog.auth import Principal
from catalog.identifiers import Namespace, decode_segment, parse_namespace
from catalog.service.namespaces import NamespaceService

PageToken = Annotated[str | None, Parameter(query="pageToken", required=False)]
PageSize = Annotated[int | None, Parameter(query="pageSize", required=False)]


class NamespaceController(Controller):
    path = "/v1/{prefix:str}/namespaces"
    tags = ["Catalog API"]

    @get(operation_id="listNamespaces")
    async def list_namespaces(
        self,
        prefix: str,
        principal: Principal,
        namespaces: NamespaceService,
        parent: str | None = None,
        page_token: PageToken = None,
        page_size: PageSize = None,
    ) -> ListNamespacesResponse:
        parent_ns = parse_namespace(parent) if parent else None
        levels, next_token = await namespaces.list_namespaces(
            principal, decode_segment(prefix), parent_ns, page_token, page_size_value(page_size)
        )
        return ListNamespacesResponse(namespaces=levels, next_page_token=next_token)

    @post(operation_id="createNamespace", status_code=200)
    async def create_namespace(
        self, prefix: str, principal: Principal, namespaces: NamespaceService, data: CreateNamespaceRequest
    ) -> CreateNamespaceResponse:
        namespace = Namespace.of(data.namespace)
        props = await namespaces.create(principal, decode_segment(prefix), namespace, data.properties)
        return CreateNamespaceResponse(namespace=list(namespace.levels), properties=props)

    @get("/{namespace:str}", operation_id="loadNamespaceMetadata")
    async def load_namespace(
        self, prefix: str, namespace: str, principal: Principal, namespaces: NamespaceService
    ) -> GetNamespaceResponse:
        ns = parse_namespace(namespace)
        props = await namespaces.load(principal, decode_segment(prefix), ns)
        return GetNamespaceResponse(namespace=list(ns.levels), properties=props)

    @head("/{namespace:str}", operation_id="namespaceExists", status_code=204)
    async def namespace_exists(
        self, prefix: str, namespace: str, principal: Principal, namespaces: NamespaceService
    ) -> None:
        await namespaces.load(principal, decode_segment(prefix), parse_namespace(namespace))

    @delete("/{namespace:str}", operation_id="dropNamespace", status_code=204)
    async def drop_namespace(
        self, prefix: str, namespace: str, principal: Principal, namespaces: NamespaceService
    ) -> None:
        await namespaces.drop(principal, decode_segment(prefix), parse_namespace(namespace))

    @post("/{namespace:str}/properties", operation_id="updateProperties", status_code=200)
    async def update_properties(
        self,
        prefix: str,
        namespace: str,
        principal: Principal,
        namespaces: NamespaceService,
        data: UpdateNamespacePropertiesRequest,
    ) -> UpdateNamespacePropertiesResponse:
        updated, removed, missing = await namespaces.update_properties(
            principal, decode_segment(prefix), parse_namespace(namespace), data.removals, data.updates
        )
        # Always a list: pyiceberg's response model rejects `missing: null` although the spec allows it.
        return UpdateNamespacePropertiesResponse(updated=updated, removed=removed, missing=missing)
