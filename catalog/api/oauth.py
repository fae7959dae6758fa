"""`POST /v1/oauth/tokens`: API keys as OAuth2 client credentials, answered with signed access tokens.

Errors are OAuth2 error JSON (RFC 6749 §5.2, mapped in `catalog.api.errors`), not the Iceberg error
model: clients parse them as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

import msgspec
from litestar import Request, Response, post
from litestar.enums import RequestEncodingType
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Body

from catalog.api.audit import TOKEN_CLIENT_STATE_KEY, TOKEN_OPERATION
from catalog.api.errors import TOKEN_PATH, OAuthError, TokenAnswer, oauth_error
from catalog.security.tokens import AccessToken
from catalog.service.security import ACCESS_TOKEN_TYPE, AuthService, OAuthFailure, parse_token_request


class OAuthTokenResponse(msgspec.Struct):
    access_token: str
    token_type: str
    expires_in: int
    issued_token_type: str
    scope: str | None = None


class OAuthTokenRequest(msgspec.Struct):
    grant_type: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None
    subject_token: str | None = None
    subject_token_type: str | None = None
    actor_token: str | None = None
    actor_token_type: str | None = None
    requested_token_type: str | None = None


# A token request's fields (others are ignored, as RFC 6749 §3.2 asks).
TOKEN_REQUEST_FIELDS = frozenset(OAuthTokenRequest.__struct_fields__)


def parse_token_form(body: bytes) -> dict[str, str]:
    """A token request's form body: its known fields, blank ones left out (as Litestar's form parsing
    does); `OAuthFailure` for a field given twice (RFC 6749 §3.2 forbids it)."""
    form: dict[str, str] = {}
    for name, value in parse_qsl(body.decode("utf-8", "replace"), separator="&"):
        if name not in TOKEN_REQUEST_FIELDS:
            continue
        if name in form:
            raise OAuthFailure(400, "invalid_request", f"The {name} parameter is given more than once")
        form[name] = value
    return form


def granted_answer(token: AccessToken, scope: str | None) -> TokenAnswer:
    """The answer that grants `token`."""
    body = OAuthTokenResponse(
        access_token=token.token,
        token_type="bearer",
        expires_in=token.expires_in,
        issued_token_type=ACCESS_TOKEN_TYPE,
        scope=scope,
    )
    return 200, msgspec.json.encode(body), {"Cache-Control": "no-store", "Pragma": "no-cache"}


async def answer_token_request(
    auth: AuthService,
    form: Mapping[str, str],
    authorization: str | None,
    source: str,
    state: dict[str, Any],
    *,
    remember_as: bytes | None = None,
) -> TokenAnswer:
    """The answer to a token request: client credentials (form body or HTTP Basic) or RFC 8693 token
    exchange (token refresh). The client id that asked goes into `state` for the audit log; a granted
    client-credentials request is remembered under `remember_as` (`AuthService.repeated_grant`)."""
    try:
        token_request = parse_token_request(dict(form), authorization)
        if "\x00" in (token_request.client_id or ""):  # no client has one, and PostgreSQL cannot look it up
            raise OAuthFailure(400, "invalid_request", "Malformed client_id: it contains a NUL character")
        if token_request.client_id:
            # The audit log names who asked for a token (the request has no principal yet).
            state[TOKEN_CLIENT_STATE_KEY] = token_request.client_id
        token, scope = await auth.issue_token(token_request, source, remember_as=remember_as)
    except OAuthFailure as exc:
        return oauth_error(exc, basic=bool(authorization and authorization.lower().startswith("basic ")))
    return granted_answer(token, scope)


@post(
    TOKEN_PATH,
    operation_id=TOKEN_OPERATION,
    tags=["OAuth2 API"],
    status_code=200,
    summary="Get a token using an OAuth2 flow",
    responses={
        200: ResponseSpec(data_container=OAuthTokenResponse, description="OAuth2 token response"),
        400: ResponseSpec(data_container=OAuthError, description="OAuth2 error: invalid_request, …"),
        401: ResponseSpec(data_container=OAuthError, description="OAuth2 error: invalid_client"),
        429: ResponseSpec(data_container=OAuthError, description="Too many failed attempts (Retry-After)"),
    },
)
async def get_token(
    request: Request[Any, Any, Any],
    auth: AuthService,
    data: OAuthTokenRequest = Body(media_type=RequestEncodingType.URL_ENCODED),
) -> Response[bytes]:
    """Client credentials (form body or HTTP Basic) and RFC 8693 token exchange (token refresh)."""
    # Form bodies are answered on the hot path (`catalog.api.hot_routes`): this handler takes the rest
    # and documents the route.
    form = {k: str(v) for k, v in msgspec.to_builtins(data).items() if v is not None}
    status, body, headers = await answer_token_request(
        auth,
        form,
        request.headers.get("authorization"),
        request.client.host if request.client else "unknown",
        request.scope.setdefault("state", {}),
    )
    return Response(content=body, status_code=status, media_type="application/json", headers=headers)
