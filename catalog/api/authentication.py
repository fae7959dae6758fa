"""Authentication before anything else runs: body parsing, idempotency replay, the handler.

Every route but the probes, the token endpoint and the API documentation needs a valid bearer token;
the principal is put in the request state, where `provide_principal` hands it to the handlers. The web
console's routes (`/console`) carry the same token in a session cookie instead, which its own middleware
checks with the same `AuthService` (catalog/console/session.py).
"""

from __future__ import annotations

from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from catalog.api.audit import PRINCIPAL_STATE_KEY
from catalog.api.errors import catalog_error_headers, error_body
from catalog.auth import ANONYMOUS_ADMIN, Principal
from catalog.errors import CatalogError

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/v1/oauth/tokens"})
COOKIE_AUTHENTICATED_PREFIX = "/console"


def _is_public(scope: Scope) -> bool:
    template = str(scope.get("path_template") or "")
    if template == COOKIE_AUTHENTICATED_PREFIX or template.startswith(COOKIE_AUTHENTICATED_PREFIX + "/"):
        return True  # authenticated by the console's session middleware, from its cookie
    return template in PUBLIC_PATHS or template.startswith("/openapi")


async def authenticate_scope(state: State, scope: Scope) -> Principal:
    """The caller of an HTTP request (the anonymous administrator when authentication is off), or
    the `CatalogError` that refuses it."""
    if state.ctx.settings.auth_mode == "none":
        return ANONYMOUS_ADMIN
    authorization = None
    for key, value in scope.get("headers", ()):
        if key.lower() == b"authorization":
            authorization = value.decode("latin-1")
            break
    principal: Principal = await state.auth.authenticate(authorization)
    return principal


# An answer built before it is sent: status, body, headers beside the body's length and type (lower-case
# names), whether the body is JSON.
Answer = tuple[int, bytes, list[tuple[bytes, bytes]], bool]


def refusal(scope: Scope, exc: CatalogError) -> Answer:
    """The answer to a refused authentication, naming the scheme to use (RFC 6750)."""
    body = b"" if scope.get("method") == "HEAD" else error_body(exc.status_code, exc.error_type, exc.message)
    if exc.status_code == 503:  # the caller could not be checked (the database is unavailable)
        headers = [(k.lower().encode(), v.encode()) for k, v in catalog_error_headers(exc).items()]
        return exc.status_code, body, headers, True
    return exc.status_code, body, [(b"www-authenticate", b'Bearer realm="floe"')], True


async def send_answer(send: Send, answer: Answer, *extra: tuple[bytes, bytes]) -> None:
    """Send `answer` (a 304 without a length), with `extra` headers after its own."""
    status, body, headers, json = answer
    start = [(b"content-length", str(len(body)).encode())] if status != 304 else []
    if json:
        start.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": [*start, *headers, *extra]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_refusal(scope: Scope, send: Send, exc: CatalogError) -> None:
    """Send the `refusal` of a request."""
    await send_answer(send, refusal(scope, exc))


def authentication_middleware(app: ASGIApp) -> ASGIApp:
    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or _is_public(scope):
            await app(scope, receive, send)
            return
        try:
            principal = await authenticate_scope(scope["litestar_app"].state, scope)
        except CatalogError as exc:
            await send_refusal(scope, send, exc)
            return
        scope.setdefault("state", {})[PRINCIPAL_STATE_KEY] = principal
        await app(scope, receive, send)

    return middleware
