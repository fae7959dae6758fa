"""The console's session: floe's own access token in a cookie, checked on every request by the same
`AuthService` that checks bearer tokens, and a CSRF token on every form.

- Sign-in exchanges an API key (client id + secret) for a token at `AuthService.issue_token`, exactly as
  `POST /v1/oauth/tokens` does (same failure limits, same audit entry); the token goes into an HttpOnly,
  SameSite=Strict cookie scoped to `/console` (Secure when the request came over HTTPS).
- Every later request hands that token to `AuthService.authenticate_token`: a revoked or rotated key, or
  an expired token, ends the session at once (within the key-state cache's seconds).
- CSRF: double submit. A random token lives in a second HttpOnly, SameSite=Strict cookie; every form
  carries it in a hidden field (rendered by the server), and every POST whose field does not match the
  cookie is refused with 403 before its handler runs.
"""

from __future__ import annotations

import hmac
import secrets
from http.cookies import SimpleCookie
from typing import Any

from litestar import Request
from litestar.datastructures import MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from catalog.api.audit import PRINCIPAL_STATE_KEY
from catalog.auth import ANONYMOUS_ADMIN
from catalog.errors import CatalogError, Forbidden

CONSOLE_PATH = "/console"
SESSION_COOKIE = "floe_console_session"
CSRF_COOKIE = "floe_console_csrf"
CSRF_FIELD = "csrf_token"
CSRF_STATE_KEY = "console_csrf"
# Route option: the route is reachable without a session (sign-in, static files).
PUBLIC_OPTION = "console_public"


class NotSignedIn(CatalogError):
    """No session, or one whose token no longer authenticates: the console answers with the sign-in page."""

    status_code = 401
    error_type = "NotAuthorizedException"


def _cookies(scope: Scope) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for key, value in scope.get("headers", ()):
        if key.lower() == b"cookie":
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed Cookie header is no session, not a server error
                return {}
    return {name: morsel.value for name, morsel in jar.items()}


def is_https(scope: Scope) -> bool:
    return scope.get("scheme") == "https"


def cookie_header(name: str, value: str, scope: Scope, *, max_age: int | None = None) -> str:
    """A console cookie: HttpOnly (no script reads it), SameSite=Strict (no other site sends it), only
    for `/console`, and Secure when the request came over HTTPS."""
    parts = [f"{name}={value}", f"Path={CONSOLE_PATH}", "HttpOnly", "SameSite=Strict"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    if is_https(scope):
        parts.append("Secure")
    return "; ".join(parts)


def session_cookie(token: str, scope: Scope, lifetime_seconds: int) -> str:
    return cookie_header(SESSION_COOKIE, token, scope, max_age=lifetime_seconds)


def expired_session_cookie(scope: Scope) -> str:
    return cookie_header(SESSION_COOKIE, "", scope, max_age=0)


def session_token(scope: Scope) -> str | None:
    return _cookies(scope).get(SESSION_COOKIE) or None


def csrf_token(request: Request[Any, Any, Any]) -> str:
    """The CSRF token the page's forms carry (the cookie's, or the new one this response sets)."""
    return str(request.scope.get("state", {}).get(CSRF_STATE_KEY, ""))


async def check_csrf(request: Request[Any, Any, Any]) -> None:
    """`before_request` of every console route: a POST must carry the CSRF cookie's token in its form."""
    if request.method != "POST":
        return
    expected = _cookies(request.scope).get(CSRF_COOKIE, "")
    given = (await request.form()).get(CSRF_FIELD, "")
    if not expected or not isinstance(given, str) or not hmac.compare_digest(expected, given):
        raise Forbidden("The form's CSRF token is missing or does not match: reload the page and retry")


def _is_public(scope: Scope) -> bool:
    handler = scope.get("route_handler")
    return bool(handler is not None and handler.opt.get(PUBLIC_OPTION))


def console_session_middleware(app: ASGIApp) -> ASGIApp:
    """Authenticate the session cookie (routes not marked public) and hand out the CSRF cookie.

    The principal goes where `authentication_middleware` puts it for bearer tokens, so the handlers,
    the services' authorization and the audit log see a console user exactly as an API caller."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        cookies = _cookies(scope)
        state = scope.setdefault("state", {})
        csrf = cookies.get(CSRF_COOKIE)
        new_csrf = None
        if not csrf:
            csrf = new_csrf = secrets.token_urlsafe(32)
        state[CSRF_STATE_KEY] = csrf
        if not _is_public(scope):
            ctx_app = scope["litestar_app"]
            if ctx_app.state.ctx.settings.auth_mode == "none":
                state[PRINCIPAL_STATE_KEY] = ANONYMOUS_ADMIN
            else:
                token = cookies.get(SESSION_COOKIE)
                if not token:
                    raise NotSignedIn("Sign in with an API key")
                try:
                    state[PRINCIPAL_STATE_KEY] = await ctx_app.state.auth.authenticate_token(token)
                except CatalogError as exc:
                    raise NotSignedIn(exc.message) from None

        async def send_with_csrf(message: Message) -> None:
            if message["type"] == "http.response.start" and new_csrf is not None:
                MutableScopeHeaders.from_message(message).add(
                    "set-cookie", cookie_header(CSRF_COOKIE, new_csrf, scope)
                )
            await send(message)

        await app(scope, receive, send_with_csrf)

    return middleware
