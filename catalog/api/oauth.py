"""`POST /v1/oauth/tokens`: API keys as OAuth2 client credentials, answered with signed access tokens.

Errors are OAuth2 error JSON (RFC 6749 §5.2), not the Iceberg error model: clients parse them as such.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.enums import RequestEncodingType
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Body

from catalog.api.audit import TOKEN_CLIENT_STATE_KEY
from catalog.service.security import ACCESS_TOKEN_TYPE, AuthService, OAuthFailure, parse_token_request


class OAuthTokenResponse(msgspec.Struct):
    access_token: str
    token_type: str
    expires_in: int
    issued_token_type: str
    scope: str | None = None


class OAuthError(msgspec.Struct, omit_defaults=True):
    """RFC 6749 §5.2 error response."""

    error: str
    error_description: str | None = None
    error_uri: str | None = None


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


def oauth_error(exc: OAuthFailure, *, basic: bool) -> Response[bytes]:
    headers = {"Cache-Control": "no-store"}
    if exc.status == 401 and basic:
        headers["WWW-Authenticate"] = 'Basic realm="floe"'
    if exc.retry_after is not None:
        headers["Retry-After"] = str(exc.retry_after)
    body = msgspec.json.encode(OAuthError(exc.error, exc.description))
    return Response(content=body, status_code=exc.status, media_type="application/json", headers=headers)


@post(
    "/v1/oauth/tokens",
    operation_id="getToken",
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
    form = {k: str(v) for k, v in msgspec.to_builtins(data).items() if v is not None}
    authorization = request.headers.get("authorization")
    try:
        token_request = parse_token_request(form, authorization)
        if "\x00" in (token_request.client_id or ""):  # no client has one, and PostgreSQL cannot look it up
            raise OAuthFailure(400, "invalid_request", "Malformed client_id: it contains a NUL character")
        if token_request.client_id:
            # The audit log names who asked for a token (the request has no principal yet).
            request.scope.setdefault("state", {})[TOKEN_CLIENT_STATE_KEY] = token_request.client_id
        source = request.client.host if request.client else "unknown"
        token, scope = await auth.issue_token(token_request, source)
    except OAuthFailure as exc:
        return oauth_error(exc, basic=bool(authorization and authorization.lower().startswith("basic ")))
    body = OAuthTokenResponse(
        access_token=token.token,
        token_type="bearer",
        expires_in=token.expires_in,
        issued_token_type=ACCESS_TOKEN_TYPE,
        scope=scope,
    )
    return Response(
        content=msgspec.json.encode(body),
        media_type="application/json",
        headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
    )
