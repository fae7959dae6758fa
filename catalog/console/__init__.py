"""The web console at `/console`: an HTTP layer beside catalog/api, over the same services.

Server-rendered Jinja2 pages (templates/), htmx for the live parts and uPlot for charts, both vendored
under static/vendor with their licenses (no CDN, no Node build). A session is an API key's floe token in
an HttpOnly cookie (`session.py`); what a page shows and what a form may do is decided by the services'
authorization, exactly as for a REST call with that key. `FLOE_CONSOLE=off` leaves it out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from litestar import Request, Response, Router
from litestar.datastructures import CacheControlHeader
from litestar.exceptions import HTTPException
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Template
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from catalog.api.errors import page_failure
from catalog.console import formatting
from catalog.console.controllers import (
    KeysController,
    PagesController,
    PipelineController,
    SessionController,
    page,
)
from catalog.console.dead_letters import DeadLettersController
from catalog.console.session import (
    CONSOLE_PATH,
    PUBLIC_OPTION,
    NotSignedIn,
    check_csrf,
    console_session_middleware,
    expired_session_cookie,
)
from catalog.errors import CatalogError

STATIC_DIRECTORY = Path(__file__).parent / "static"
# Only the console's own scripts and styles (no inline script, no other origin); uPlot sizes its
# elements through inline styles.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    """Jinja2 with autoescaping, and undefined names as errors (a template typo fails its test)."""
    environment = Environment(
        loader=PackageLoader("catalog.console", "templates"),
        autoescape=select_autoescape(default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(formatting.FILTERS)
    return TemplateConfig(engine=JinjaTemplateEngine.from_environment(environment))


def _signed_out(request: Request[Any, Any, Any], exc: NotSignedIn) -> Response[Any]:
    """No valid session: to the sign-in page (htmx follows `HX-Redirect` for a whole-page change)."""
    target = f"{CONSOLE_PATH}/sign-in"
    cookie = expired_session_cookie(request.scope)
    if request.headers.get("hx-request"):
        return Response(b"", status_code=401, headers={"HX-Redirect": target, "set-cookie": cookie})
    return Redirect(target, status_code=303, headers={"set-cookie": cookie})


def _catalog_error(request: Request[Any, Any, Any], exc: CatalogError) -> Template:
    """A domain failure as a page with the same status and message the REST API would answer."""
    principal = request.scope.get("state", {}).get("principal")
    status, message = page_failure(exc)
    return page(request, principal, "error.html", status, status=status, message=message)


def _http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Template:
    """Litestar's own client errors (a malformed query parameter, an unknown method) as pages."""
    principal = request.scope.get("state", {}).get("principal")
    status, message = page_failure(exc)
    return page(request, principal, "error.html", status, status=status, message=message)


def console_router() -> Router:
    """Every console route, behind the session middleware and the CSRF check."""
    static = create_static_files_router(
        path="/static",
        directories=[STATIC_DIRECTORY],
        opt={PUBLIC_OPTION: True},
        include_in_schema=False,
        cache_control=CacheControlHeader(max_age=3600),
    )
    return Router(
        path="/",
        route_handlers=[
            SessionController,
            PagesController,
            KeysController,
            PipelineController,
            DeadLettersController,
            _static(static),
        ],
        middleware=[console_session_middleware],
        before_request=check_csrf,
        exception_handlers={
            NotSignedIn: _signed_out,
            CatalogError: _catalog_error,
            HTTPException: _http_error,
        },
        include_in_schema=False,
        cache_control=CacheControlHeader(no_store=True),
        response_headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
        },
    )


def _static(router: Router) -> Router:
    return Router(path=CONSOLE_PATH, route_handlers=[router])


__all__ = ["CONSOLE_PATH", "console_router", "template_config"]
