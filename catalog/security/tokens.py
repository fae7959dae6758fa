"""Signed access tokens: ES256 JWTs with a key id, keys kept in the database.

Keys persist across restarts and are shared by every catalog process. Rotation adds a new signing key
and retires the old ones, which keep verifying until every token they signed has expired. Verified
tokens are cached briefly by their text, so a request pays for signature checks only once per token;
a token this process signed is known without a check.

Engines ask for a token before most operations (Trino 476: two per query), each with the same
credentials. A token issued for the same claims a moment ago is answered again, with the lifetime it
has left, as a cloud metadata server answers its cached token: signing costs more than the rest of a
token request, and every new token costs each catalog process a signature check on its first use.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import secrets
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet

from catalog.errors import NotAuthorized
from catalog.store.interfaces import SigningKeyStore
from catalog.store.security import SigningKeyRecord

ALGORITHM = "ES256"
ISSUER = "floe"
_CACHE_SIZE = 10_000
# A token of a key id this process does not know (another process just rotated) waits for the next
# reload of the keys, at most one a second: it is accepted within a second, junk costs one read a second.
_RELOAD_INTERVAL_SECONDS = 1.0
# floe's tokens are about 600 characters, an identity provider's a few KiB; longer ones are never parsed.
MAX_TOKEN_CHARS = 16 * 1024
# What parsing an untrusted token may raise: each is an invalid token, never a server error.
_MALFORMED = (JoseError, ValueError, TypeError, KeyError, AttributeError, RecursionError)
# Tokens answered again, at most this share of their lifetime after they were signed.
MAX_REUSE_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class AccessToken:
    token: str
    expires_in: int


def _new_key() -> tuple[str, ECKey]:
    kid = f"floe-{datetime.now(UTC):%Y%m%d}-{secrets.token_hex(4)}"
    key = ECKey.generate_key("P-256", parameters={"kid": kid, "use": "sig", "alg": ALGORITHM})
    return kid, key


class TokenSigner:
    """Issues and verifies floe access tokens."""

    def __init__(self, store: SigningKeyStore, lifetime: timedelta, reuse: timedelta = timedelta(0)) -> None:
        self.store = store
        self.lifetime = lifetime
        # A token is answered again for the same claims (same key, same secret version) this long.
        self.reuse_seconds = min(reuse.total_seconds(), lifetime.total_seconds() * MAX_REUSE_SHARE)
        # (signing key id, claims) -> (the token, its iat, its exp)
        self._issued: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[str, int, int]] = {}
        self._signing: tuple[str, ECKey] | None = None
        self._verifying = KeySet([])
        self._kids: set[str] = set()
        self._loaded_at = 0.0
        self._reload: asyncio.Task[None] | None = None
        self._verified: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._claims = jwt.JWTClaimsRegistry(
            iss={"essential": True, "value": ISSUER},
            sub={"essential": True},
            exp={"essential": True},
            iat={"essential": True},
        )

    def _install(self, records: list[SigningKeyRecord]) -> None:
        keys = [ECKey.import_key(json.loads(r.private_jwk)) for r in records]
        active = [(r, k) for r, k in zip(records, keys, strict=True) if r.retired_at is None]
        if active:
            newest = max(active, key=lambda pair: pair[0].created_at)
            self._signing = (newest[0].kid, newest[1])
        self._verifying = KeySet([ECKey.import_key(k.as_dict(private=False)) for k in keys])
        self._kids = {r.kid for r in records}
        self._loaded_at = time.monotonic()

    async def load(self) -> None:
        """Read the keys; create the first signing key when there is none."""
        records = await self.store.list_signing_keys()
        if not any(r.retired_at is None for r in records):
            kid, key = _new_key()
            await self.store.add_signing_key(kid, json.dumps(key.as_dict(private=True)), retire_others=False)
            records = await self.store.list_signing_keys()
        self._install(records)

    async def rotate(self) -> str:
        """Start signing with a new key; older keys only verify until their tokens expire."""
        kid, key = _new_key()
        await self.store.add_signing_key(kid, json.dumps(key.as_dict(private=True)), retire_others=True)
        # Keys retired longer ago than a token lives can no longer have valid tokens.
        await self.store.delete_signing_keys_retired_before(
            datetime.now(UTC) - self.lifetime - timedelta(minutes=5)
        )
        self._install(await self.store.list_signing_keys())
        return kid

    async def issue(self, claims: dict[str, Any], *, reuse: bool = False) -> AccessToken:
        """A token with these claims: new, or with `reuse` one this process signed for the same claims
        with its current key at most `reuse_seconds` ago (its `expires_in` is the lifetime it has left)."""
        if self._signing is None or time.monotonic() - self._loaded_at > 60:
            await self.load()
        assert self._signing is not None
        kid, key = self._signing
        now = int(time.time())
        cache_key = (kid, tuple(sorted(claims.items())))
        if reuse:
            issued = self._issued.get(cache_key)
            if issued is not None and now - issued[1] <= self.reuse_seconds and issued[2] > now:
                return AccessToken(issued[0], issued[2] - now)
        lifetime = int(self.lifetime.total_seconds())
        payload = {
            **claims,
            "iss": ISSUER,
            "iat": now,
            "nbf": now - 5,
            "exp": now + lifetime,
            "jti": uuid.uuid4().hex,
        }
        token = jwt.encode({"alg": ALGORITHM, "kid": kid, "typ": "JWT"}, payload, key, algorithms=[ALGORITHM])
        # Signed here just now: its first use in this process needs no signature check.
        self._remember(token, payload)
        if reuse and self.reuse_seconds > 0:
            if len(self._issued) >= _CACHE_SIZE:
                self._issued.clear()
            self._issued[cache_key] = (token, now, now + lifetime)
        return AccessToken(token, lifetime)

    def _remember(self, token: str, claims: dict[str, Any]) -> None:
        self._verified[token] = (float(claims["exp"]), claims)
        if len(self._verified) > _CACHE_SIZE:
            self._verified.popitem(last=False)

    def verified_expiry(self, token: str) -> float | None:
        """The expiry (epoch seconds) of a token `verify` accepted and still remembers."""
        cached = self._verified.get(token)
        return cached[0] if cached is not None else None

    async def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, or `NotAuthorized` for anything but a valid, unexpired floe token."""
        now = time.time()
        cached = self._verified.get(token)
        if cached is not None and cached[0] > now:
            return cached[1]
        if len(token) > MAX_TOKEN_CHARS:
            raise NotAuthorized("Invalid token: too long")
        try:
            header = _header_of(token)
            if header.get("alg") != ALGORITHM:
                raise NotAuthorized("Invalid token: unsupported signing algorithm")
            kid = header.get("kid")
            if not isinstance(kid, str):
                raise NotAuthorized("Invalid token: no signing key id")
            if kid not in self._kids:
                await self._reload_keys()  # another process may have rotated
            if kid not in self._kids:
                raise NotAuthorized("Invalid token: unknown signing key")
            decoded = jwt.decode(token, self._verifying, algorithms=[ALGORITHM])
            self._claims.validate(decoded.claims)
            claims = _checked_claims(dict(decoded.claims))
        except NotAuthorized:
            raise
        except _MALFORMED as exc:
            raise NotAuthorized(f"Invalid token: {type(exc).__name__}") from exc
        self._remember(token, claims)
        return claims

    async def _reload_keys(self) -> None:
        """Read the keys again, at most once per `_RELOAD_INTERVAL_SECONDS`: callers meanwhile wait for
        the next read and share it (a cancelled caller does not cancel it)."""
        if self._reload is None or self._reload.done():
            self._reload = asyncio.create_task(self._reload_after_interval())
        await asyncio.shield(self._reload)

    async def _reload_after_interval(self) -> None:
        wait = self._loaded_at + _RELOAD_INTERVAL_SECONDS - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self._install(await self.store.list_signing_keys())


def _checked_claims(claims: dict[str, Any]) -> dict[str, Any]:
    """The claims floe reads, of the types it reads them as (`NotAuthorized` otherwise)."""
    for name in ("exp", "iat"):
        value = claims.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise NotAuthorized(f"Invalid token: {name} is not a number")
    for name in ("sub", "jti"):
        if not isinstance(claims.get(name, ""), str):
            raise NotAuthorized(f"Invalid token: {name} is not a string")
    return claims


def _header_of(token: str) -> dict[str, Any]:
    """The unverified JOSE header (only used to pick the key and refuse other algorithms)."""
    head = token.split(".", 1)[0]
    decoded = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    if not isinstance(decoded, dict):
        raise NotAuthorized("Invalid token: its header is not a JSON object")
    return decoded
