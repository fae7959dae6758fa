"""Authentication before anything else runs: body parsing, idempotency replay, the handler.

Every route but the probes, the token endpoint and the API documentation (`catalog.api.routing`) needs a
valid bearer token, checked by the request pipeline's step here; the principal is put in the request
state, where `provide_principal` hands it to the handlers. The web console's routes (`/console`) carry
the same token in a session cookie instead, which its own middleware hands to the same `authenticate`
(catalog/console/session.py). Refusals are answered as `catalog.api.errors.refusal` maps them.
"""

from __future__ import annotations

from litestar.datastructures import State
from litestar.types import ASGIApp, Receive, Scope, Send

from catalog.api.audit import PRINCIPAL_STATE_KEY
from catalog.api.errors import Answer, failure, refusal, send_answer
from catalog.auth import ANONYMOUS_ADMIN, Principal
from catalog.errors import CatalogError
from catalog.service.security import AuthService


def _bearer_header(scope: Scope) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == b"authorization":
            return str(value.decode("latin-1"))
    return None


async def authenticate(state: State, scope: Scope, *, session_token: str | None = None) -> Principal:
    """The caller of an HTTP request, from its `Authorization: Bearer` header or (the console) the
    token of its session cookie; the anonymous administrator when authentication is off. A refusal is
    the `CatalogError` raised."""
    if state.components.settings.auth_mode == "none":
        return ANONYMOUS_ADMIN
    auth: AuthService = state.auth
    if session_token is not None:
        return await auth.authenticate_token(session_token)
    return await auth.authenticate(_bearer_header(scope))


async def authenticated(state: State, scope: Scope) -> Principal | Answer:
    """The caller, put in the request state, or the answer that refuses the request."""
    try:
        principal = await authenticate(state, scope)
    except CatalogError as exc:
        return refusal(scope, exc)
    except Exception as exc:  # the key could not be read (the database is down)
        return failure(scope, exc)
    scope.setdefault("state", {})[PRINCIPAL_STATE_KEY] = principal
    return principal


def authentication_step(app: ASGIApp, state: State) -> ASGIApp:
    """The request pipeline's authentication step for an operation that needs it: `authenticated`
    before `app` (idempotency, the handler), a refused request answered here."""

    async def step(scope: Scope, receive: Receive, send: Send) -> None:
        principal = await authenticated(state, scope)
        if not isinstance(principal, Principal):
            await send_answer(send, principal)
            return
        await app(scope, receive, send)

    return step
