"""The console's pages: thin handlers like catalog/api's (parse, call the services, render), with HTML
instead of JSON. Every read and write goes through the services the REST API uses, with the signed-in
key's principal, so a console user can do exactly what the key can do through the API."""

from __future__ import annotations

import difflib
import logging
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

import anyio
import yaml
from litestar import Controller, Request, Response, get, post
from litestar.di import Provide
from litestar.params import Parameter
from litestar.response import Redirect, Template

from catalog.api.audit import TOKEN_CLIENT_STATE_KEY
from catalog.api.management import MAX_AUDIT_ID
from catalog.auth import Principal, Role, require_admin
from catalog.console.commit_events import outbox_status
from catalog.console.paging import KEYS_PER_PAGE, Pages, page_number
from catalog.console.readings import ConsoleReader, TableRef, size_histogram
from catalog.console.session import (
    CONSOLE_PATH,
    CSRF_FIELD,
    PUBLIC_OPTION,
    csrf_token,
    end_session,
    expired_session_cookie,
    session_cookie,
)
from catalog.console.snippets import connect_snippets
from catalog.errors import BadRequest, CatalogError, NotFound, ServiceUnavailable
from catalog.identifiers import parse_name, parse_namespace
from catalog.pipelines import InvalidConfig
from catalog.pipelines.bounds import LIMITS
from catalog.pipelines.config import validate_read
from catalog.pipelines.yaml_values import Marks, read_yaml, with_line
from catalog.service.audit import OUTCOMES, AuditService, audit_filter
from catalog.service.clusters import ClusterService
from catalog.service.ingest_history import IngestHistory
from catalog.service.keys import KeyService, NewKey
from catalog.service.maintenance import MaintenanceService
from catalog.service.namespaces import NamespaceService
from catalog.service.pipelines import PipelineService
from catalog.service.security import CLIENT_CREDENTIALS, AuthService, OAuthFailure, TokenRequest
from catalog.service.tables import TableService
from catalog.service.watermarks import WatermarkService

log = logging.getLogger(__name__)

AUDIT_PAGE_SIZE = 100
MAX_PIPELINE_BYTES = LIMITS.max_bytes


def table_path(ref: TableRef, page: str = "") -> str:
    """The console URL of a table page: namespace levels joined by %1F, each percent-encoded, as in the
    REST API's paths."""
    namespace = "%1F".join(quote(level, safe="") for level in ref.namespace)
    suffix = f"/{page}" if page else ""
    warehouse, name = quote(ref.warehouse, safe=""), quote(ref.name, safe="")
    return f"{CONSOLE_PATH}/tables/{warehouse}/{namespace}/{name}{suffix}"


def can_manage_keys(principal: Principal) -> bool:
    return principal.is_admin or (principal.cluster is not None and principal.role is Role.ADMIN)


def can_read_pipeline(principal: Principal) -> bool:
    return principal.is_admin or (principal.cluster is not None and principal.role is not Role.READER)


def page(
    request: Request[Any, Any, Any],
    principal: Principal | None,
    template: str,
    status_code: int = 200,
    **context: Any,
) -> Template:
    """A full page: the template with the navigation's facts about the signed-in key."""
    return Template(
        template,
        context={
            "principal": principal,
            "csrf_field": CSRF_FIELD,
            "csrf_token": csrf_token(request),
            "console": CONSOLE_PATH,
            "table_path": table_path,
            "can_manage_keys": principal is not None and can_manage_keys(principal),
            "can_read_pipeline": principal is not None and can_read_pipeline(principal),
            "is_admin": principal is not None and principal.is_admin,
            "now_ms": int(datetime.now(UTC).timestamp() * 1000),
            "path": request.url.path,
            **context,
        },
        status_code=status_code,
    )


async def _overview_page(
    request: Request[Any, Any, Any],
    principal: Principal,
    reader: ConsoleReader,
    tables: TableService,
    template: str,
) -> Template:
    """The overview rendered with the whole page's template or the rows' fragment that htmx polls: a
    page of the clusters (`?page=`), or of one cluster's tables (`?cluster=&page=`)."""
    cluster = request.query_params.get("cluster") or None
    number = page_number(request.query_params.get("page"))
    overview = await reader.overview(tables.settings.console_ingest_metrics_url, cluster, number)
    # The whole page only (not the rows htmx polls): commit events, for global administrators.
    events = (
        await outbox_status(principal, tables.store, tables.settings) if template == "overview.html" else None
    )
    return page(request, principal, template, overview=overview, events=events)


def _ref(warehouse: str, namespace: str, table: str) -> TableRef:
    return TableRef(parse_name(warehouse, "warehouse"), parse_namespace(namespace).levels, parse_name(table))


def provide_reader(
    principal: Principal,
    clusters: ClusterService,
    namespaces: NamespaceService,
    tables: TableService,
    maintenance: MaintenanceService,
    pipelines: PipelineService,
    watermarks: WatermarkService,
) -> ConsoleReader:
    """The read pages' one dependency: what this key may read, through the REST API's services."""
    return ConsoleReader(principal, clusters, namespaces, tables, maintenance, pipelines, watermarks)


def _text(form: Any, name: str, limit: int = 1000) -> str:
    value = form.get(name, "")
    if not isinstance(value, str):
        raise BadRequest(f"Invalid form field {name}")
    if len(value) > limit:
        raise BadRequest(f"Form field {name} is too long (at most {limit} characters)")
    return value.strip()


class SessionController(Controller):
    """Sign in with an API key, sign out."""

    path = CONSOLE_PATH

    @get("/sign-in", opt={PUBLIC_OPTION: True})
    async def sign_in_page(self, request: Request[Any, Any, Any]) -> Template:
        return page(request, None, "sign_in.html")

    @post("/sign-in", opt={PUBLIC_OPTION: True}, operation_id="consoleSignIn", status_code=303)
    async def sign_in(self, request: Request[Any, Any, Any], auth: AuthService) -> Response[Any]:
        """Exchange the key for floe's token (the token endpoint's rules); the session cookie keeps it."""
        form = await request.form()
        client_id = _text(form, "client_id", 200)
        secret = form.get("client_secret", "")
        request.scope.setdefault("state", {})[TOKEN_CLIENT_STATE_KEY] = client_id
        token_request = TokenRequest(
            grant_type=CLIENT_CREDENTIALS,
            client_id=client_id,
            client_secret=secret if isinstance(secret, str) else None,
            subject_token=None,
            subject_token_type=None,
            scope="catalog",
            used_basic=False,
        )
        source = request.client.host if request.client else "unknown"
        try:
            token, _ = await auth.issue_token(token_request, source, fresh=True)
        except OAuthFailure as exc:
            message = (
                "Too many failed attempts: try again later"
                if exc.status == 429
                else "Sign-in failed: unknown client id or wrong secret"
            )
            return page(request, None, "sign_in.html", exc.status, error=message, client_id=client_id)
        return Redirect(
            CONSOLE_PATH,
            status_code=303,
            headers={"set-cookie": session_cookie(token.token, request.scope, token.expires_in)},
        )

    @post("/sign-out", operation_id="consoleSignOut", status_code=303)
    async def sign_out(self, request: Request[Any, Any, Any], auth: AuthService) -> Response[Any]:
        await end_session(auth, request.scope)  # the cookie's token stops working everywhere
        return Redirect(
            f"{CONSOLE_PATH}/sign-in",
            status_code=303,
            headers={"set-cookie": expired_session_cookie(request.scope)},
        )


class PagesController(Controller):
    """The overview, table and connect pages (what a key may read)."""

    path = CONSOLE_PATH
    dependencies = {"reader": Provide(provide_reader, sync_to_thread=False)}

    @get("/")
    async def overview(
        self,
        request: Request[Any, Any, Any],
        principal: Principal,
        reader: ConsoleReader,
        tables: TableService,
    ) -> Template:
        return await _overview_page(request, principal, reader, tables, "overview.html")

    @get("/overview/rows")
    async def overview_rows(
        self,
        request: Request[Any, Any, Any],
        principal: Principal,
        reader: ConsoleReader,
        tables: TableService,
    ) -> Template:
        """The overview's tables alone: htmx polls this to refresh the page in place."""
        return await _overview_page(request, principal, reader, tables, "overview_rows.html")

    @get("/tables/{warehouse:str}/{namespace:str}/{table:str}")
    async def table_page(
        self,
        request: Request[Any, Any, Any],
        warehouse: str,
        namespace: str,
        table: str,
        principal: Principal,
        reader: ConsoleReader,
        tables: TableService,
    ) -> Template:
        details = await reader.table(_ref(warehouse, namespace, table))  # authorized: the key reads it
        history: IngestHistory | None = getattr(request.app.state, "ingest_history", None)
        samples = await history.samples(details.ref.dotted) if history is not None else None
        return page(
            request,
            principal,
            "table.html",
            table=details,
            history_hours=tables.settings.console_metrics_retention_hours,
            history=None
            if samples is None
            else [
                [round(s.at.timestamp(), 3), s.records_per_second, s.time_lag_seconds, s.offset_lag]
                for s in samples
            ],
        )

    @get("/tables/{warehouse:str}/{namespace:str}/{table:str}/sample")
    async def sample_fragment(
        self,
        request: Request[Any, Any, Any],
        warehouse: str,
        namespace: str,
        table: str,
        principal: Principal,
        reader: ConsoleReader,
        tables: TableService,
    ) -> Template:
        """Data file sizes and the newest rows (for a dead-letter table: its latest errors), loaded by the
        table page on request because it reads files."""
        ref = _ref(warehouse, namespace, table)
        try:
            sample = await reader.sample(ref)
        except ServiceUnavailable as exc:  # storage failed or timed out: said so, without its paths
            log.warning("sample of %s failed: %s", ref.dotted, exc.message)
            return page(request, principal, "table_sample.html", sample=None, ref=ref)
        except CatalogError:
            raise
        except Exception as exc:  # a file that cannot be read: said so, without its contents or path
            log.warning("sample of %s failed: %s", ref.dotted, type(exc).__name__)
            return page(request, principal, "table_sample.html", sample=None, ref=ref)
        return page(
            request,
            principal,
            "table_sample.html",
            sample=sample,
            ref=ref,
            histogram=size_histogram(sample.file_sizes),
        )

    @get("/tables/{warehouse:str}/{namespace:str}/{table:str}/connect")
    async def connect_page(
        self,
        request: Request[Any, Any, Any],
        warehouse: str,
        namespace: str,
        table: str,
        principal: Principal,
        tables: TableService,
    ) -> Template:
        ref = _ref(warehouse, namespace, table)
        await tables.exists(principal, ref.warehouse, ref.ident)
        base = str(request.base_url).rstrip("/")
        return page(request, principal, "connect.html", ref=ref, snippets=connect_snippets(base, ref))


class KeysController(Controller):
    """Clusters and API keys (global administrators, and a cluster's admin keys for its own keys)."""

    path = CONSOLE_PATH

    async def _page(
        self,
        request: Request[Any, Any, Any],
        principal: Principal,
        keys: KeyService,
        clusters: ClusterService,
        status_code: int = 200,
        **context: Any,
    ) -> Template:
        every = await keys.list(principal, None)
        pages = Pages.of(page_number(request.query_params.get("page")), KEYS_PER_PAGE, len(every))
        return page(
            request,
            principal,
            "keys.html",
            status_code,
            keys=every[pages.offset : pages.offset + pages.size],
            key_pages=pages,
            clusters=await clusters.list(principal),
            roles=[r.value for r in Role],
            **context,
        )

    @get("/keys")
    async def keys_page(
        self,
        request: Request[Any, Any, Any],
        principal: Principal,
        keys: KeyService,
        clusters: ClusterService,
    ) -> Template:
        return await self._page(request, principal, keys, clusters)

    @post("/keys", operation_id="consoleCreateKey", status_code=200)
    async def create_key(
        self,
        request: Request[Any, Any, Any],
        principal: Principal,
        keys: KeyService,
        clusters: ClusterService,
    ) -> Template:
        """Create a key; its secret is on this page only."""
        form = await request.form()
        cluster = _text(form, "cluster", 200) or None
        if not principal.is_admin:
            cluster = principal.cluster  # a cluster admin creates keys of its own cluster only
        days = _text(form, "expires_in_days", 10)
        try:
            expires_in = int(float(days) * 86400) if days else None
        except (ValueError, OverflowError) as exc:  # "x", "nan"; "inf"
            raise BadRequest("Invalid expiry: a number of days") from exc
        issued = await keys.create(
            principal,
            NewKey(_text(form, "role", 20), cluster, _text(form, "description", 500), None, expires_in),
        )
        # The page holds a secret: the router's `Cache-Control: no-store` keeps it out of every cache.
        return await self._page(
            request,
            principal,
            keys,
            clusters,
            issued=issued.record,
            secret=issued.secret,
            secret_action="created",
        )

    @post("/keys/{client_id:str}/rotate", operation_id="consoleRotateKey", status_code=200)
    async def rotate_key(
        self,
        request: Request[Any, Any, Any],
        client_id: str,
        principal: Principal,
        keys: KeyService,
        clusters: ClusterService,
    ) -> Template:
        issued = await keys.rotate(principal, parse_name(client_id, "client id"))
        return await self._page(
            request,
            principal,
            keys,
            clusters,
            issued=issued.record,
            secret=issued.secret,
            secret_action="rotated",
        )

    @post("/keys/{client_id:str}/revoke", operation_id="consoleRevokeKey", status_code=303)
    async def revoke_key(self, client_id: str, principal: Principal, keys: KeyService) -> Redirect:
        await keys.revoke(principal, parse_name(client_id, "client id"))
        return Redirect(f"{CONSOLE_PATH}/keys", status_code=303)

    @post("/clusters", operation_id="consoleCreateCluster", status_code=303)
    async def create_cluster(
        self, request: Request[Any, Any, Any], principal: Principal, clusters: ClusterService
    ) -> Redirect:
        form = await request.form()
        await clusters.create(principal, _text(form, "name", 200), _text(form, "warehouse", 200) or None, {})
        return Redirect(f"{CONSOLE_PATH}/keys", status_code=303)

    @get("/audit")
    async def audit_page(
        self,
        request: Request[Any, Any, Any],
        principal: Principal,
        audit: AuditService,
        actor: str | None = None,
        action: str | None = None,
        target: str | None = None,
        outcome: str | None = None,
        since: str | None = None,
        until: str | None = None,
        cluster: str | None = None,
        hide_pipeline: str | None = None,
        before: Annotated[int | None, Parameter(ge=1, le=MAX_AUDIT_ID)] = None,
    ) -> Template:
        filters = audit_filter(
            subject=actor,
            action=action,
            target=target,
            outcome=outcome,
            since=since,
            until=until,
            hide_pipeline=bool(hide_pipeline),
        )
        listing = await audit.list(principal, cluster or None, AUDIT_PAGE_SIZE, before, filters)
        query = {
            "actor": actor or "",
            "action": action or "",
            "target": target or "",
            "outcome": outcome or "",
            "since": since or "",
            "until": until or "",
            "cluster": cluster or "",
            "hide_pipeline": "on" if hide_pipeline else "",
        }
        return page(
            request,
            principal,
            "audit.html",
            entries=listing.entries,
            next_before=listing.next_before,
            query=query,
            outcomes=OUTCOMES,
        )


class PipelineController(Controller):
    """The applied floe.yaml with its revisions and their diffs, and applying a new one (a dry run first)
    with `floe apply`'s validation."""

    path = CONSOLE_PATH

    @get("/pipeline")
    async def pipeline_page(
        self,
        request: Request[Any, Any, Any],
        principal: Principal,
        pipelines: PipelineService,
        revision: int | None = None,
        compare: int | None = None,
    ) -> Template:
        state = await _pipeline_state(principal, pipelines, revision, compare)
        return page(request, principal, "pipeline.html", **state)

    @post("/pipeline", operation_id="consoleApplyPipeline", status_code=200)
    async def apply(
        self, request: Request[Any, Any, Any], principal: Principal, pipelines: PipelineService
    ) -> Template:
        """Validate the YAML as `floe apply` does (errors at their lines), then dry-run it, or apply it
        when the dry run's page confirmed it."""
        # Who may apply is decided before the YAML is looked at; then it is parsed within its bounds
        # (bytes, nesting, aliases) in a worker thread, never on the event loop.
        require_admin(principal, "apply a pipeline configuration")
        form = await request.form()
        text = form.get("config", "")
        if not isinstance(text, str) or len(text) > MAX_PIPELINE_BYTES:
            raise BadRequest(f"Invalid floe.yaml: at most {MAX_PIPELINE_BYTES} characters of text")
        confirm = _text(form, "confirm", 10) == "yes"
        try:
            data, marks = await anyio.to_thread.run_sync(_read_pipeline, text)
            try:
                result = await pipelines.apply(principal, data, dry_run=not confirm)
            except InvalidConfig as exc:  # the server's checks (clusters, schema evolution): located too
                raise InvalidConfig([with_line(e, marks) for e in exc.errors]) from None
        except InvalidConfig as exc:
            state = await _pipeline_state(principal, pipelines, None, None)
            return page(request, principal, "pipeline.html", 400, **state, text=text, errors=exc.errors)
        state = await _pipeline_state(principal, pipelines, None, None)
        return page(request, principal, "pipeline.html", **state, text=text, result=result)


def _read_pipeline(text: str) -> tuple[Any, Marks]:
    """`floe apply`'s checks of floe.yaml text (errors at their lines), then its data and their lines
    (the text parsed once)."""
    read = read_yaml(text)
    validate_read(read)
    return read[0], read[1]


def _as_yaml(config: dict[str, Any]) -> str:
    return str(yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True))


async def _pipeline_state(
    principal: Principal, pipelines: PipelineService, revision: int | None, compare: int | None
) -> dict[str, Any]:
    """The revisions, the one shown (default: the newest) as YAML, and its diff against `compare`."""
    history = await pipelines.history(principal)
    by_number = {state.record.revision: state for state in history}
    shown = by_number.get(revision) if revision is not None else (history[0] if history else None)
    if revision is not None and shown is None:
        raise NotFound(f"Pipeline revision does not exist: {revision}")
    diff: list[str] | None = None
    if shown is not None and compare is not None:
        other = by_number.get(compare)
        if other is None:
            raise NotFound(f"Pipeline revision does not exist: {compare}")
        diff = list(
            difflib.unified_diff(
                _as_yaml(other.config.to_json()).splitlines(),
                _as_yaml(shown.config.to_json()).splitlines(),
                f"revision {compare}",
                f"revision {shown.record.revision}",
                lineterm="",
            )
        )
    return {
        "history": history,
        "shown": shown,
        "shown_yaml": _as_yaml(shown.config.to_json()) if shown is not None else "",
        "compare": compare,
        "diff": diff,
    }
