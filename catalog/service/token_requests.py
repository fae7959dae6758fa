"""A token request as the token endpoint and the console's sign-in receive it, and its OAuth2 failures."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from urllib.parse import unquote

CLIENT_CREDENTIALS = "client_credentials"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"


class OAuthFailure(Exception):
    """An RFC 6749 error answer of the token endpoint."""

    def __init__(self, status: int, error: str, description: str, *, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class TokenRequest:
    grant_type: str | None
    client_id: str | None
    client_secret: str | None
    subject_token: str | None
    subject_token_type: str | None
    scope: str | None
    used_basic: bool


def parse_token_request(form: dict[str, str], authorization: str | None) -> TokenRequest:
    """Client credentials come in the form (Java, pyiceberg `credential`) or as HTTP Basic (DuckDB)."""
    client_id, client_secret = form.get("client_id"), form.get("client_secret")
    used_basic = False
    if authorization and authorization[:6].lower() == "basic ":
        try:
            raw = base64.b64decode(authorization[6:].strip(), validate=True).decode()
            basic_id, _, basic_secret = raw.partition(":")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise OAuthFailure(400, "invalid_request", "Malformed HTTP Basic credentials") from exc
        # RFC 6749 §2.3.1: Basic credentials are form-urlencoded before base64.
        client_id, client_secret, used_basic = unquote(basic_id), unquote(basic_secret), True
    return TokenRequest(
        grant_type=form.get("grant_type"),
        client_id=client_id,
        client_secret=client_secret,
        subject_token=form.get("subject_token"),
        subject_token_type=form.get("subject_token_type"),
        scope=form.get("scope"),
        used_basic=used_basic,
    )
