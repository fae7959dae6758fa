"""The console's session: floe's own access token in a cookie, checked on every request by the same
`AuthService` that checks bearer tokens, and a CSRF token on every form.

- Sign-in exchanges an API key (client id + secret) for a token at `AuthService.issue_token`, exactly as
  `POST /v1/oauth/tokens` does (same failure limits, same audit entry); the token goes into an HttpOnly,
  SameSite=Strict cookie scoped to `/console` (Secure when the request came over HTTPS).
- Every later request hands that token to `AuthService.authenticate_token`: a revoked or rotated key, or
  an expired token, ends the session at once (within the key-state cache's seconds). A page loaded past
  half the token's lifetime renews it by token exchange, so an active session outlives its first token.
- Sign-out revokes the token (`AuthService.revoke_token`): the old cookie, or the token used as a bearer
  token, stops working at once in this process and within the key-state cache's seconds in the others.
  Each sign-in gets a token of its own (never one also answered to an engine's token request).
- CSRF: double submit. A random token lives in a second HttpOnly, SameSite=Strict cookie; every form
  carries it in a hidden field (rendered by the server), and every POST whose field does not match the
  cookie is refused with 403 before its handler runs.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import time
from http.cookies import SimpleCookie
from typing import Any

from litestar import Request
from litestar.datastructures import MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from catalog.api.audit import PRINCIPAL_STATE_KEY
from catalog.api.authentication import authenticate
from catalog.auth import ANONYMOUS_ADMIN
from catalog.errors import CatalogError, Forbidden, NotAuthorized
from catalog.service.security import (
    ACCESS_TOKEN_TYPE,
    TOKEN_EXCHANGE,
    AuthService,
    OAuthFailure,
    TokenRequest,
)

CONSOLE_PATH = "/console"
SESSION_COOKIE = "floe_console_session"
CSRF_COOKIE = "floe_console_csrf"
CSRF_FIELD = "csrf_token"
CSRF_STATE_KEY = "console_csrf"
# Route option: the route is reachable without a session (sign-in, static files).
PUBLIC_OPTION = "console_public"


class NotSignedIn(NotAuthorized):
    """No session, or one whose token no longer authenticates: the console answers with the sign-in page."""


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


async def end_session(auth: AuthService, scope: Scope) -> None:
    """Sign-out: revoke the session's token, so a copy of the cookie no longer works (as a bearer token
    neither) in any catalog process."""
    token = session_token(scope)
    if token:
        with contextlib.suppress(CatalogError):  # no valid token: no session to end
            await auth.revoke_token(token)


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


async def _renewed_session(auth: AuthService, token: str, scope: Scope) -> str | None:
    """A session cookie with a fresh token once the session's token is past half its lifetime (the
    token endpoint's token exchange, which checks the key again), so an active session does not end
    when its first token expires; None while the token is young, or when the exchange is refused."""
    claims = await auth.signer.verify(token)  # verified a moment ago: from the signer's cache
    issued, expires = float(claims.get("iat", 0)), float(claims.get("exp", 0))
    if time.time() < issued + (expires - issued) / 2:
        return None
    exchange = TokenRequest(
        grant_type=TOKEN_EXCHANGE,
        client_id=None,
        client_secret=None,
        subject_token=token,
        subject_token_type=ACCESS_TOKEN_TYPE,
        scope="catalog",
        used_basic=False,
    )
    client = scope.get("client")
    try:
        fresh, _ = await auth.issue_token(exchange, client[0] if client else "unknown")
    except OAuthFailure:
        return None
    return session_cookie(fresh.token, scope, fresh.expires_in)


async def send_to_sign_in(scope: Scope, send: Send) -> None:
    """No valid session: to the sign-in page (htmx follows `HX-Redirect` for a whole-page change), the
    stale cookie expired. Sent here rather than raised: what a middleware raises is answered as an API
    error, not by the console's handlers."""
    target = f"{CONSOLE_PATH}/sign-in".encode()
    headers = [
        (b"content-length", b"0"),
        (b"cache-control", b"no-store"),
        (b"set-cookie", expired_session_cookie(scope).encode("latin-1")),
    ]
    if any(key.lower() == b"hx-request" and value for key, value in scope.get("headers", ())):
        status = 401
        headers.append((b"hx-redirect", target))
    else:
        status = 303
        headers.append((b"location", target))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def console_session_middleware(app: ASGIApp) -> ASGIApp:
    """Authenticate the session cookie (routes not marked public) and hand out the CSRF cookie.

    The principal goes where `authentication_step` puts it for bearer tokens, so the handlers,
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
        renewed: str | None = None
        if not _is_public(scope):
            ctx_app = scope["litestar_app"]
            if ctx_app.state.components.settings.auth_mode == "none":
                state[PRINCIPAL_STATE_KEY] = ANONYMOUS_ADMIN
            else:
                token = cookies.get(SESSION_COOKIE)
                if not token:
                    await send_to_sign_in(scope, send)
                    return
                auth: AuthService = ctx_app.state.auth
                try:
                    state[PRINCIPAL_STATE_KEY] = await authenticate(ctx_app.state, scope, session_token=token)
                except CatalogError:
                    await send_to_sign_in(scope, send)
                    return
                if scope.get("method") == "GET":  # never beside a form's own cookie (sign-out)
                    renewed = await _renewed_session(auth, token, scope)

        async def send_with_cookies(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableScopeHeaders.from_message(message)
                if new_csrf is not None:
                    headers.add("set-cookie", cookie_header(CSRF_COOKIE, new_csrf, scope))
                if renewed is not None:
                    headers.add("set-cookie", renewed)
            await send(message)

        await app(scope, receive, send_with_cookies)

    return middleware
