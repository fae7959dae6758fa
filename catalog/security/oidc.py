"""External identity provider: bearer tokens signed by an OpenID Connect issuer.

With `FLOE_OIDC_ISSUER` set, floe also accepts the JWT access tokens of that issuer. Its signing keys come
from discovery (`{issuer}/.well-known/openid-configuration` → `jwks_uri`) and are cached for an hour. A
token whose key id floe has not seen — or whose signature fails against the cached key, because some
issuers keep the key id when they change the key — makes floe fetch discovery and the key set again, at
most once per `FLOE_OIDC_JWKS_MIN_REFRESH_SECONDS`, so forged tokens cannot make floe hammer the issuer.

Only asymmetric signatures are accepted (RS*, PS*, ES*), with an algorithm that fits the key (and equals
the key's own `alg` when the key set names one): never `none`, never HMAC, so a public key can never be
used as a shared secret. `iss` must be the issuer exactly, `exp` is required, `nbf` and `iat` are checked
when present (30 s clock leeway), and `aud` must name `FLOE_OIDC_AUDIENCE` when that is set.

Claims name the cluster and role (`ClaimMapping`); `AuthService` turns them into a principal. floe cannot
revoke external tokens: they stay valid until they expire — disable the user or client at the identity
provider and keep its access tokens short-lived.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import httpx
from authlib.oidc.discovery import OpenIDProviderMetadata, get_well_known_url  # type: ignore[import-untyped]
from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import ECKey, RSAKey

from catalog.auth import Role
from catalog.errors import NotAuthorized, ServiceUnavailable

log = logging.getLogger(__name__)

RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_ALGORITHM_BY_CURVE = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
ALGORITHMS = RSA_ALGORITHMS | frozenset(EC_ALGORITHM_BY_CURVE.values())
KEY_SET_MAX_AGE_SECONDS = 3600.0
CLOCK_LEEWAY_SECONDS = 30
HTTP_TIMEOUT_SECONDS = 5.0
MAX_DOCUMENT_BYTES = 1024 * 1024
# Verified tokens are remembered briefly: a request pays for the signature check once per token, and a
# key the issuer withdraws stops working within a minute.
_VERIFIED_CACHE_SECONDS = 60.0
_CACHE_SIZE = 10_000
_ROLE_RANK = {Role.READER: 0, Role.WRITER: 1, Role.ADMIN: 2}

PublicKey = RSAKey | ECKey


def unverified_issuer(token: str) -> str | None:
    """The `iss` claim of a compact JWT, unverified (only used to choose who verifies it)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(_b64decode(parts[1]))
    except (ValueError, binascii.Error, RecursionError):  # deeply nested junk too
        return None
    issuer = payload.get("iss") if isinstance(payload, dict) else None
    return issuer if isinstance(issuer, str) else None


def _b64decode(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


@dataclass(frozen=True, slots=True)
class ExternalIdentity:
    """Who an external token names: its subject, its cluster (None: global) and its floe role."""

    subject: str
    cluster: str | None
    role: Role


class ClaimMapping:
    """Turns verified claims into an identity: which claim holds the cluster, which the role, and which
    values of the role claim mean which floe role."""

    def __init__(self, cluster_claim: str, role_claim: str, role_values: dict[str, str]) -> None:
        self.cluster_claim = cluster_claim
        self.role_claim = role_claim
        self.role_values = {value: Role(role) for value, role in role_values.items()}

    def identity(self, claims: dict[str, Any]) -> ExternalIdentity:
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise NotAuthorized("Invalid token: no subject")
        role = self._role(claims)
        cluster = self._cluster(claims)
        if cluster is None and role is not Role.ADMIN:
            raise NotAuthorized(
                f"Token has no {self.cluster_claim} claim: only a global admin token may omit it"
            )
        return ExternalIdentity(subject=subject, cluster=cluster, role=role)

    def _role(self, claims: dict[str, Any]) -> Role:
        raw = _claim(claims, self.role_claim)
        # A list (groups, roles) grants the strongest floe role among its values.
        values = raw if isinstance(raw, list) else [raw]
        roles = [self.role_values[v] for v in values if isinstance(v, str) and v in self.role_values]
        if not roles:
            if raw is None:
                raise NotAuthorized(f"Token has no {self.role_claim} claim")
            raise NotAuthorized(f"Token's {self.role_claim} claim names no floe role")
        return max(roles, key=_ROLE_RANK.__getitem__)

    def _cluster(self, claims: dict[str, Any]) -> str | None:
        raw = _claim(claims, self.cluster_claim)
        if isinstance(raw, list) and len(raw) == 1:
            raw = raw[0]
        if raw is None or raw == "":
            return None
        if not isinstance(raw, str):
            raise NotAuthorized(f"Token's {self.cluster_claim} claim must name one cluster")
        return raw


def _claim(claims: dict[str, Any], name: str) -> Any:
    """A claim by its name, or by a dotted path into nested objects (`realm_access.roles`).

    The exact name wins: namespaced claims such as `https://example.com/role` contain dots."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


@dataclass(frozen=True, slots=True)
class _SigningKey:
    key: PublicKey
    algorithms: frozenset[str]


def _signing_key(jwk: dict[str, Any]) -> _SigningKey | None:
    """A verification key from a JWKS entry, or None for keys floe never verifies with (encryption keys,
    symmetric keys, unknown key types or curves)."""
    if jwk.get("use", "sig") != "sig":
        return None
    if "key_ops" in jwk and "verify" not in jwk["key_ops"]:
        return None
    public = {k: v for k, v in jwk.items() if k not in ("d", "p", "q", "dp", "dq", "qi", "oth", "k")}
    key: PublicKey
    if jwk.get("kty") == "RSA":
        key, algorithms = RSAKey.import_key(public), set(RSA_ALGORITHMS)
    elif jwk.get("kty") == "EC" and jwk.get("crv") in EC_ALGORITHM_BY_CURVE:
        key, algorithms = ECKey.import_key(public), {EC_ALGORITHM_BY_CURVE[jwk["crv"]]}
    else:
        return None
    if "alg" in jwk:
        algorithms &= {jwk["alg"]}
    return _SigningKey(key, frozenset(algorithms)) if algorithms else None


class _KeySet:
    def __init__(self, keys: dict[str, _SigningKey], unnamed: list[_SigningKey]) -> None:
        self.keys = keys
        self.unnamed = unnamed

    def select(self, kid: str | None, algorithm: str) -> PublicKey | None:
        if kid is not None:
            found = self.keys.get(kid)
        else:  # without a key id only an unambiguous key set will do
            candidates = list(self.keys.values()) + self.unnamed
            found = candidates[0] if len(candidates) == 1 else None
        return found.key if found is not None and algorithm in found.algorithms else None


class OidcVerifier:
    """Verifies the access tokens of one OpenID Connect issuer."""

    def __init__(self, issuer: str, audience: str | None, *, min_refresh_seconds: float = 30.0) -> None:
        self.issuer = issuer
        self.audience = audience
        self.min_refresh_seconds = min_refresh_seconds
        self._key_set: _KeySet | None = None
        self._fetched_at = 0.0  # last successful fetch (monotonic)
        self._attempted_at = float("-inf")  # last attempt, successful or not
        self._generation = 0
        self._lock = asyncio.Lock()
        self._verified: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        claims: dict[str, Any] = {
            "iss": {"essential": True, "value": issuer},
            "sub": {"essential": True},
            "exp": {"essential": True},
        }
        if audience is not None:
            claims["aud"] = {"essential": True, "value": audience}
        self._claims = jwt.JWTClaimsRegistry(leeway=CLOCK_LEEWAY_SECONDS, **claims)

    async def warm_up(self) -> None:
        """Fetch discovery and keys at start, so a misconfiguration shows in the log at once."""
        if self.audience is None:
            log.warning(
                "FLOE_OIDC_AUDIENCE is not set: tokens %s issued for any audience are accepted", self.issuer
            )
        try:
            await self._refresh(self._generation)
        except ServiceUnavailable as exc:
            log.warning("OIDC issuer %s: %s (will retry when a token needs it)", self.issuer, exc.message)

    async def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, or `NotAuthorized` (`ServiceUnavailable` when the issuer's keys are
        needed and cannot be fetched)."""
        now = time.time()
        cached = self._verified.get(token)
        if cached is not None and cached[0] > now:
            return cached[1]
        header = _header_of(token)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
            raise NotAuthorized("Invalid token: signing algorithm not accepted")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise NotAuthorized("Invalid token: malformed key id")
        decoded = await self._decode(token, kid, algorithm)
        claims = decoded.claims
        try:
            self._claims.validate(claims)
        except ExpiredTokenError as exc:
            raise NotAuthorized("Invalid token: expired") from exc
        except MissingClaimError as exc:
            raise NotAuthorized(f"Invalid token: missing claim {exc.claim}") from exc
        except InvalidClaimError as exc:
            reasons = {
                "aud": f"audience is not {self.audience}",
                "iss": "wrong issuer",
                "nbf": "not valid yet",
                "iat": "issued in the future",
            }
            raise NotAuthorized(f"Invalid token: {reasons.get(exc.claim, exc.description)}") from exc
        except JoseError as exc:
            raise NotAuthorized(f"Invalid token: {type(exc).__name__}") from exc
        expires = min(float(claims["exp"]), now + _VERIFIED_CACHE_SECONDS)
        self._verified[token] = (expires, claims)
        if len(self._verified) > _CACHE_SIZE:
            self._verified.popitem(last=False)
        return claims

    async def _decode(self, token: str, kid: str | None, algorithm: str) -> jwt.Token:
        if self._key_set is None or time.monotonic() - self._fetched_at > KEY_SET_MAX_AGE_SECONDS:
            await self._refresh(self._generation)
        generation = self._generation
        outcome = self._try_decode(token, kid, algorithm)
        # An unknown key id, or a signature the cached key rejects: the issuer may have rotated its keys.
        if not isinstance(outcome, jwt.Token) and await self._refresh(generation):
            outcome = self._try_decode(token, kid, algorithm)
        if isinstance(outcome, jwt.Token):
            return outcome
        raise NotAuthorized(f"Invalid token: {outcome}")

    def _try_decode(self, token: str, kid: str | None, algorithm: str) -> jwt.Token | str:
        """The decoded token, or why the current keys do not verify it."""
        key = self._key_set.select(kid, algorithm) if self._key_set is not None else None
        if key is None:
            return "unknown signing key"
        try:
            return jwt.decode(token, key, algorithms=[algorithm])
        except BadSignatureError:
            return "bad signature"
        except (JoseError, ValueError, TypeError) as exc:
            raise NotAuthorized(f"Invalid token: {type(exc).__name__}") from exc

    async def _refresh(self, seen_generation: int) -> bool:
        """Fetch discovery and keys unless another request just did; whether there are new keys.

        A failed fetch keeps the cached keys (`ServiceUnavailable` only when there are none)."""
        async with self._lock:
            if self._generation != seen_generation:
                return True  # another request fetched while this one waited for the lock
            if time.monotonic() - self._attempted_at >= self.min_refresh_seconds:
                self._attempted_at = time.monotonic()
                try:
                    self._key_set = await self._fetch_key_set()
                except ServiceUnavailable:
                    if self._key_set is None:
                        raise
                    log.warning("OIDC issuer %s: refresh failed, keeping the cached keys", self.issuer)
                    return False
                self._fetched_at = time.monotonic()
                self._generation += 1
                return True
            if self._key_set is None:
                raise ServiceUnavailable(f"OIDC issuer {self.issuer} is unavailable; retry later")
            return False

    async def _fetch_key_set(self) -> _KeySet:
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS, follow_redirects=False) as client:
                discovery = await _get_json(client, get_well_known_url(self.issuer, external=True))
                jwks_uri = self._check_discovery(discovery)
                jwks = await _get_json(client, jwks_uri)
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("OIDC issuer %s: %s", self.issuer, exc)
            raise ServiceUnavailable(f"OIDC issuer {self.issuer} is unavailable: {exc}") from exc
        entries = jwks.get("keys")
        if not isinstance(entries, list):
            raise ServiceUnavailable(f"OIDC issuer {self.issuer}: key set has no 'keys' list")
        keys: dict[str, _SigningKey] = {}
        unnamed: list[_SigningKey] = []
        for entry in entries:
            try:
                key = _signing_key(entry) if isinstance(entry, dict) else None
            except (JoseError, ValueError, TypeError, KeyError) as exc:
                log.warning(
                    "OIDC issuer %s: skipping unusable key %s: %s", self.issuer, entry.get("kid"), exc
                )
                continue
            if key is None:
                continue
            kid = entry.get("kid")
            if isinstance(kid, str):
                keys[kid] = key
            else:
                unnamed.append(key)
        log.info("OIDC issuer %s: %d signing keys loaded", self.issuer, len(keys) + len(unnamed))
        return _KeySet(keys, unnamed)

    def _check_discovery(self, document: dict[str, Any]) -> str:
        metadata = OpenIDProviderMetadata(document)
        # OpenID Connect Discovery §4.3: the document must name exactly the configured issuer.
        if document.get("issuer") != self.issuer:
            raise ValueError(f"discovery names issuer {document.get('issuer')!r}, expected {self.issuer!r}")
        metadata.validate_issuer()
        if not document.get("jwks_uri"):
            raise ValueError("discovery document has no jwks_uri")
        metadata.validate_jwks_uri()  # https, or http on loopback
        return str(document["jwks_uri"])


async def _get_json(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await client.get(url, headers={"Accept": "application/json"})
    if response.status_code != 200:
        raise ValueError(f"GET {url} answered {response.status_code}")
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"GET {url}: document too large")
    document = response.json()
    if not isinstance(document, dict):
        raise ValueError(f"GET {url}: not a JSON object")
    return document


def _header_of(token: str) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3:
        raise NotAuthorized("Invalid token: not a signed JWT")
    try:
        header = json.loads(_b64decode(parts[0]))
    except (ValueError, binascii.Error, RecursionError) as exc:
        raise NotAuthorized("Invalid token: malformed header") from exc
    if not isinstance(header, dict):
        raise NotAuthorized("Invalid token: malformed header")
    return header
