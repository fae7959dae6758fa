"""Authentication: the OAuth2 token endpoint's rules, bearer-token checks, admin bootstrap.

API keys (client id + secret) are OAuth2 client credentials; floe answers them with a short-lived signed
token that names the key's cluster and role. Every request's bearer token is verified against the
signing keys and the key's current state (revoked or expired keys stop working at once), which also
names the key's tokens revoked before their expiry (console sign-out, `revoke_token`). Failed token
requests are counted and limited per client id and source address (`catalog.service.auth_failures`).
With FLOE_OIDC_ISSUER set, tokens of that external issuer are accepted too (`catalog/security/oidc.py`):
their claims name the cluster and role; floe cannot revoke them, they are valid until they expire.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from catalog.auth import Principal, Role
from catalog.errors import AlreadyExists, NotAuthorized, NotFound
from catalog.security.oidc import ClaimMapping, OidcVerifier, unverified_issuer
from catalog.security.secrets import (
    DUMMY_HASH,
    FAST,
    hash_password,
    hash_secret,
    is_slow,
    is_upgradable,
    new_client_id,
    new_client_secret,
    predates_versions,
    secret_digest,
    secret_version,
    upgraded_hash,
    verify_secret,
)
from catalog.security.tokens import MAX_TOKEN_CHARS, AccessToken, TokenSigner
from catalog.service.auth_failures import FailureLimits, KeyedLocks
from catalog.service.shared_reads import SharedReads
from catalog.service.token_requests import (
    ACCESS_TOKEN_TYPE,
    CLIENT_CREDENTIALS,
    JWT_TOKEN_TYPE,
    TOKEN_EXCHANGE,
    OAuthFailure,
    TokenRequest,
    parse_token_request,
)
from catalog.settings import Settings
from catalog.store.interfaces import SecurityStore
from catalog.store.security import ApiKeyRecord, ClusterRecord, Revocations

log = logging.getLogger(__name__)

# Re-exported: the HTTP layers take the token request's types from here.
__all__ = [
    "ACCESS_TOKEN_TYPE",
    "CLIENT_CREDENTIALS",
    "TOKEN_EXCHANGE",
    "AuthService",
    "OAuthFailure",
    "TokenRequest",
    "parse_token_request",
]

KEY_STATE_CACHE_SECONDS = 2.0
MAX_CACHED_PRINCIPALS = 10_000
# (monotonic and wall-clock time of the read, the key then, its revoked tokens then)
_KeyState = tuple[float, float, "ApiKeyRecord | None", Revocations]
# (monotonic time of the read, the key, the source addresses that presented its secret)
_ClientState = tuple[float, "ApiKeyRecord", frozenset[str]]
# Source addresses remembered per key (a key used from more starts the set again).
MAX_KNOWN_SOURCES = 1_000
# Revoked tokens of one key kept one by one; beyond, a sign-out ends every token of the key issued so far.
MAX_REVOKED_TOKENS_PER_KEY = 1_000
# The schema's client_id column is 64 characters: a longer one cannot name a key.
MAX_CLIENT_ID_LENGTH = 64
LAST_USED_RESOLUTION = timedelta(seconds=60)
# Token claim: the fingerprint of the key's secret hash when the token was issued (see `secret_version`).
SECRET_VERSION_CLAIM = "sv"
# scrypt checks at once per process (operator-chosen and legacy secrets only; each takes tens of ms).
SLOW_HASH_THREADS = 2

_T = TypeVar("_T")


class AuthService:
    """Issues tokens for API keys and turns bearer tokens into principals."""

    def __init__(self, store: SecurityStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.signer = TokenSigner(
            store,
            timedelta(seconds=settings.token_lifetime_seconds),
            reuse=timedelta(seconds=settings.token_reuse_seconds),
        )
        # client id -> (monotonic and wall-clock time of the read, the key then)
        self._key_state: dict[str, _KeyState] = {}
        # bearer token -> (its principal, the key state it was checked against, the token's expiry):
        # a repeated token costs a dictionary lookup while that key state stands.
        self._principals: dict[str, tuple[Principal, _KeyState, float]] = {}
        self._key_reads: SharedReads[str, tuple[ApiKeyRecord | None, Revocations]] = SharedReads(
            store.get_api_key_state
        )
        # client id -> (slow hash, digest of the secret verified against it), so an operator's secret
        # costs scrypt once per process, not on every token request.
        self._slow_verified: dict[str, tuple[str, bytes]] = {}
        self._slow_pool = ThreadPoolExecutor(SLOW_HASH_THREADS, thread_name_prefix="floe-scrypt")
        self.failures = FailureLimits(store, settings)
        self._client_locks = KeyedLocks()
        self._client_state: dict[str, _ClientState] = {}
        # digest of a granted token request's body and Authorization header -> (the client state it was
        # checked against, the scope answered): see `repeated_grant`.
        self._grants: dict[bytes, tuple[_ClientState, str]] = {}
        self._cluster_state: dict[str, tuple[float, ClusterRecord | None]] = {}
        self.oidc: OidcVerifier | None = None
        if settings.oidc_issuer:
            self.oidc = OidcVerifier(
                settings.oidc_issuer,
                settings.oidc_audience,
                min_refresh_seconds=settings.oidc_jwks_min_refresh_seconds,
            )
        self.claim_mapping = ClaimMapping(
            settings.oidc_cluster_claim, settings.oidc_role_claim, settings.oidc_role_values
        )

    # -- tokens -----------------------------------------------------------------------------------

    async def issue_token(
        self, request: TokenRequest, source: str, *, remember_as: bytes | None = None, fresh: bool = False
    ) -> tuple[AccessToken, str | None]:
        """Answer a token request: (token, scope) or `OAuthFailure`. A granted client-credentials
        request is remembered under `remember_as` (see `repeated_grant`); `fresh`: a token of its own
        (a console session's, which sign-out revokes), never one answered to others too."""
        if request.grant_type == CLIENT_CREDENTIALS:
            key = await self._check_client(request, source)
            scope = request.scope or "catalog"
            state = self._client_state.get(key.client_id)
            if remember_as is not None and state is not None and state[1] is key:
                if len(self._grants) >= MAX_CACHED_PRINCIPALS:
                    self._grants.clear()
                self._grants[remember_as] = (state, scope)
            # Engines ask again before most operations: a token of a moment ago serves (see `TokenSigner`).
            return await self.signer.issue(self._claims_for(key), reuse=not fresh), scope
        elif request.grant_type == TOKEN_EXCHANGE:
            if not request.subject_token:
                raise OAuthFailure(400, "invalid_request", "subject_token is required for token exchange")
            if request.subject_token_type not in (None, ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE):
                raise OAuthFailure(
                    400, "invalid_request", f"Unsupported subject_token_type {request.subject_token_type}"
                )
            try:  # only floe's own tokens: an external token has no key behind it
                principal = await self._authenticate_floe_token(request.subject_token)
            except NotAuthorized as exc:
                raise OAuthFailure(401, "invalid_client", "subject_token is not a valid floe token") from exc
            current = self._usable(await self._key_state_of(principal.subject))
            if current is None:
                raise OAuthFailure(
                    401, "invalid_client", "The key behind subject_token is revoked or expired"
                )
            # A refresh: always a new token, with the whole lifetime.
            claims = self._claims_for(current)
        elif request.grant_type is None:
            raise OAuthFailure(400, "invalid_request", "grant_type is required")
        else:
            raise OAuthFailure(400, "unsupported_grant_type", f"Unsupported grant_type: {request.grant_type}")
        return await self.signer.issue(claims), request.scope or "catalog"

    async def repeated_grant(self, digest: bytes, source: str) -> tuple[AccessToken, str, str] | None:
        """The answer to a client-credentials request identical to one granted a moment ago (the same
        form body and Authorization header, named by their SHA-256 `digest`): (token, scope, client id),
        or None to check it in full.

        Engines send the same request before most queries. Its credentials were verified against the
        key state still cached (`_check_client`'s fast path, which this follows: same freshness, same
        source addresses, same revocation), and the digest proves the same secret was presented again,
        so neither the form nor the secret needs checking again. Refused requests are never remembered.
        """
        remembered = self._grants.get(digest)
        if remembered is None:
            return None
        state, scope = remembered
        if (
            self._client_state.get(state[1].client_id) is not state
            or source not in state[2]
            or not self._stands(state)
        ):
            del self._grants[digest]
            return None
        key = await self._accepted(state[1])
        return await self.signer.issue(self._claims_for(key), reuse=True), scope, key.client_id

    @staticmethod
    def _claims_for(key: ApiKeyRecord) -> dict[str, str | None]:
        return {
            "sub": key.client_id,
            "cluster": key.cluster,
            "warehouse": key.warehouse,
            "role": key.role,
            SECRET_VERSION_CLAIM: secret_version(key.secret_hash),
        }

    @staticmethod
    def _too_many(settings: Settings) -> OAuthFailure:
        return OAuthFailure(
            429,
            "invalid_client",
            "Too many failed attempts; try again later",
            retry_after=settings.auth_failure_window_seconds,
        )

    async def _check_client(self, request: TokenRequest, source: str) -> ApiKeyRecord:
        """The key of valid client credentials, or `OAuthFailure`.

        Failures are counted per client id and source address (`catalog.service.auth_failures`): a
        source over its limit for a client id is refused without a check, so guessing a secret stays
        bounded, while the correct secret from any other source passes. An in-process lock per client id
        and source makes count, check and record one step.
        """
        client_id, secret = request.client_id, request.client_secret
        if not client_id or secret is None:
            raise OAuthFailure(400, "invalid_request", "client_id and client_secret are required")
        if len(client_id) > MAX_CLIENT_ID_LENGTH or "\x00" in client_id:
            # No key has such an id (and PostgreSQL text cannot hold NUL): a failure of the source only.
            if await self.failures.record_source(source):
                raise self._too_many(self.settings)
            raise OAuthFailure(401, "invalid_client", "Client authentication failed")
        cached = self._client_state.get(client_id)
        if (
            cached is not None
            and source in cached[2]
            and self._stands(cached)
            and self._known_valid(cached[1], secret)
        ):
            # The key as read a moment ago, its secret shown from this source then, like a bearer
            # token's key state: valid credentials cost no database read. Anything else: the full check.
            return await self._accepted(cached[1])
        keys = self.failures.keys(client_id, source)
        async with self._client_locks.hold(keys.pair):
            key, failures = await self.store.token_request_state(
                client_id, [keys.pair, keys.client, keys.source], self.failures.window
            )
            if self.failures.pair_refused(keys, failures):
                self._forget_source(client_id, source)
                raise self._too_many(self.settings)
            valid = await self._verify(key, secret)
            usable = key is not None and key.usable(datetime.now(UTC))
            if not valid or not usable:
                if usable:
                    self._forget_source(client_id, source)
                else:
                    self._client_state.pop(client_id, None)
                source_over = await self.failures.record(keys, failures, known=key is not None)
                reason = "revoked or expired" if valid else "unknown client or wrong secret"
                log.info("token refused for client %s from %s: %s", client_id, source, reason)
                if source_over:
                    raise self._too_many(self.settings)
                raise OAuthFailure(401, "invalid_client", "Client authentication failed")
            assert key is not None
            self._remember_source(key, source)
        if is_upgradable(key.secret_hash) and not self._is_operator_key(key.client_id):
            key = await self._upgrade(key, secret)
        return await self._accepted(key)

    def _remember_source(self, key: ApiKeyRecord, source: str) -> None:
        """Cache the key as just read, with `source` among those that presented its secret."""
        sources = {source}
        old = self._client_state.get(key.client_id)
        if old is not None and old[1].secret_hash == key.secret_hash and len(old[2]) < MAX_KNOWN_SOURCES:
            sources.update(old[2])
        if len(self._client_state) >= MAX_CACHED_PRINCIPALS:
            self._client_state.clear()
        self._client_state[key.client_id] = (time.monotonic(), key, frozenset(sources))

    def _forget_source(self, client_id: str, source: str) -> None:
        """A source refused or wrong for the key: its next request takes the full check."""
        cached = self._client_state.get(client_id)
        if cached is not None and source in cached[2]:
            self._client_state[client_id] = (cached[0], cached[1], cached[2] - {source})

    @staticmethod
    def _stands(state: _ClientState) -> bool:
        """Whether a cached client state still answers for its key: read a moment ago, usable now."""
        return time.monotonic() - state[0] < KEY_STATE_CACHE_SECONDS and state[1].usable(datetime.now(UTC))

    async def _accepted(self, key: ApiKeyRecord) -> ApiKeyRecord:
        """`key`, whose credentials were just presented, with its last use recorded (once a minute)."""
        now = datetime.now(UTC)
        if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
            await self.store.touch_api_key(key.client_id)  # at most once a minute: a write costs
            key = replace(key, last_used_at=now)
            cached = self._client_state.get(key.client_id)
            if cached is not None and cached[1].secret_hash == key.secret_hash:
                self._client_state[key.client_id] = (cached[0], key, cached[2])
        return key

    def _known_valid(self, key: ApiKeyRecord, secret: str) -> bool:
        """Whether `secret` is the key's, where that is known without scrypt (else False)."""
        stored = key.secret_hash
        if not is_slow(stored):
            return verify_secret(secret, stored)
        cached = self._slow_verified.get(key.client_id)
        if cached is None or cached[0] != stored:
            return False
        return hmac.compare_digest(cached[1], secret_digest(secret))

    async def _verify(self, key: ApiKeyRecord | None, secret: str) -> bool:
        """Check the secret; scrypt hashes in a small thread pool (never on the event loop), and an
        operator's secret only once per process while its hash stays the same."""
        if key is None:
            # Same work as a wrong secret of a key with a generated secret: timing does not tell them apart.
            verify_secret(secret, DUMMY_HASH)
            return False
        stored = key.secret_hash
        if not is_slow(stored):
            return verify_secret(secret, stored)
        if self._known_valid(key, secret):
            return True
        valid = await self._off_loop(verify_secret, secret, stored)
        if valid:
            self._slow_verified[key.client_id] = (stored, secret_digest(secret))
        return valid

    async def _off_loop(self, function: Callable[..., _T], *args: Any) -> _T:
        """Run scrypt in floe's own small pool: a flood of slow checks cannot take the shared one."""
        return await asyncio.get_running_loop().run_in_executor(self._slow_pool, function, *args)

    def _is_operator_key(self, client_id: str) -> bool:
        """The key of FLOE_ADMIN_CLIENT_ID/SECRET: a chosen secret, which keeps its slow hash."""
        return bool(self.settings.admin_client_secret) and client_id == self.settings.admin_client_id

    async def _upgrade(self, key: ApiKeyRecord, secret: str) -> ApiKeyRecord:
        """Store a verified secret of an older floe (scrypt) in the fast form: same secret, cheap checks."""
        new_hash = upgraded_hash(secret)
        if not await self.store.replace_api_key_secret_hash(key.client_id, key.secret_hash, new_hash):
            current = await self.store.get_api_key(key.client_id)
            if current is None or current.secret_hash != new_hash:
                # Rotated meanwhile: the secret just checked is no longer the key's.
                raise OAuthFailure(401, "invalid_client", "Client authentication failed")
            key = current
        self.forget_key(key.client_id)
        log.info("API key %s: secret hash upgraded to %s", key.client_id, FAST)
        return replace(key, secret_hash=new_hash)

    # -- bearer tokens ----------------------------------------------------------------------------

    async def _key_state_of(self, client_id: str, *, read_after: float | None = None) -> _KeyState:
        """The key's current state, cached for a moment: revocation and rotation take effect within
        seconds. `read_after` (wall-clock seconds): a cached state read before then is read again."""
        now = time.monotonic()
        cached = self._key_state.get(client_id)
        if (
            cached is not None
            and now - cached[0] < KEY_STATE_CACHE_SECONDS
            and (read_after is None or cached[1] >= read_after)
        ):
            return cached
        # Shared: when the cached state expires, all requests in flight would read it at once.
        key, revocations = await self._key_reads.read(client_id)
        state = (now, time.time(), key, revocations)
        self._key_state[client_id] = state
        return state

    @staticmethod
    def _usable(state: _KeyState) -> ApiKeyRecord | None:
        key = state[2]
        return key if key is not None and key.usable(datetime.now(UTC)) else None

    @staticmethod
    def _current_secret(claims: dict[str, Any], key: ApiKeyRecord) -> bool:
        """Whether the token was issued for the key's current secret (rotation ends the others)."""
        version = claims.get(SECRET_VERSION_CLAIM)
        if version is None:  # issued by an older floe: good while the secret is still the one it knew
            return predates_versions(key.secret_hash)
        return bool(version == secret_version(key.secret_hash))

    async def authenticate_token(self, token: str) -> Principal:
        """The principal of a floe token or, when configured, of a token of the external issuer."""
        if len(token) > MAX_TOKEN_CHARS:  # no token is that long: not parsed at all
            raise NotAuthorized("Invalid token: too long")
        if self.oidc is not None and unverified_issuer(token) == self.oidc.issuer:
            return await self._authenticate_external_token(self.oidc, token)
        return await self._authenticate_floe_token(token)

    async def _authenticate_external_token(self, oidc: OidcVerifier, token: str) -> Principal:
        identity = self.claim_mapping.identity(await oidc.verify(token))
        subject = f"oidc:{identity.subject}"
        if identity.cluster is None:
            return Principal(subject=subject, role=identity.role)
        cluster = await self._cluster(identity.cluster)
        if cluster is None:
            raise NotAuthorized(
                f"Cluster {identity.cluster} named by the token's "
                f"{self.claim_mapping.cluster_claim} claim does not exist"
            )
        return Principal(
            subject=subject, role=identity.role, cluster=cluster.name, warehouse=cluster.warehouse
        )

    async def _cluster(self, name: str) -> ClusterRecord | None:
        """The cluster, cached for a moment like key state: a deleted cluster's tokens stop within seconds."""
        now = time.monotonic()
        cached = self._cluster_state.get(name)
        if cached is not None and now - cached[0] < KEY_STATE_CACHE_SECONDS:
            return cached[1]
        cluster = await self.store.get_cluster(name)
        if len(self._cluster_state) > 10_000:  # names come from signed tokens, still keep it bounded
            self._cluster_state.clear()
        self._cluster_state[name] = (now, cluster)
        return cluster

    async def _authenticate_floe_token(self, token: str) -> Principal:
        known = self._principals.get(token)
        if known is not None and self._still_valid(*known):
            return known[0]
        principal, key = await self._verify_floe_token(token)
        state = self._key_state.get(principal.subject)
        if state is not None and state[2] is key:  # checked against the state now cached
            if len(self._principals) >= MAX_CACHED_PRINCIPALS:
                self._principals.clear()
            self._principals[token] = (principal, state, self._token_expiry(token))
        return principal

    def _still_valid(self, principal: Principal, state: _KeyState, expires: float) -> bool:
        """Whether a principal derived from `state` still stands: the token is unexpired and `state` is
        still the key's current cached state (a re-read, every KEY_STATE_CACHE_SECONDS or after a
        revocation or rotation through this process, replaces it, and the token is checked again)."""
        key = state[2]
        return (
            self._key_state.get(principal.subject) is state
            and time.monotonic() - state[0] < KEY_STATE_CACHE_SECONDS
            and time.time() < expires
            and key is not None
            and (key.expires_at is None or key.usable(datetime.now(UTC)))
        )

    def _token_expiry(self, token: str) -> float:
        cached = self.signer.verified_expiry(token)
        return cached if cached is not None else 0.0

    async def _verify_floe_token(self, token: str) -> tuple[Principal, ApiKeyRecord]:
        claims = await self.signer.verify(token)
        subject = str(claims["sub"])
        state = await self._key_state_of(subject)
        key = self._usable(state)
        if key is not None and not self._current_secret(claims, key):
            # The token may be newer than the cached state (another process just upgraded the hash):
            # read the key again if the state may predate the token (`iat` is in whole seconds).
            state = await self._key_state_of(subject, read_after=float(claims["iat"]) + 1)
            key = self._usable(state)
        if key is None:
            raise NotAuthorized("Token's API key is revoked or expired")
        if not self._current_secret(claims, key):
            raise NotAuthorized("Token's API key secret was rotated: get a new token")
        if state[3].revoked(claims.get("jti"), float(claims["iat"])):
            raise NotAuthorized("Token was revoked (signed out): get a new token")
        principal = Principal(
            subject=key.client_id,
            role=Role(key.role),
            cluster=key.cluster,
            warehouse=key.warehouse,
        )
        return principal, key

    async def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an `Authorization: Bearer …` header, or `NotAuthorized`."""
        if not authorization:
            raise NotAuthorized("Authentication required: send a bearer token from /v1/oauth/tokens")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthorized("Authentication required: expected a bearer token")
        return await self.authenticate_token(token.strip())

    async def revoke_token(self, token: str) -> None:
        """End a floe token before its expiry (console sign-out): here at once, in other processes when
        they read its key's state again (within KEY_STATE_CACHE_SECONDS, as a revoked key)."""
        claims = await self.signer.verify(token)
        subject, jti = str(claims["sub"]), claims.get("jti")
        if jti:
            expires = datetime.fromtimestamp(float(claims["exp"]), UTC)
            await self.store.revoke_token(subject, jti, expires, max_per_subject=MAX_REVOKED_TOKENS_PER_KEY)
        self._principals.pop(token, None)
        self._key_state.pop(subject, None)

    # -- keys -------------------------------------------------------------------------------------

    async def create_key(
        self,
        *,
        cluster: str | None,
        role: Role,
        description: str = "",
        created_by: str = "",
        expires_at: datetime | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
    ) -> tuple[ApiKeyRecord, str]:
        """A new key and its secret (the only time the secret is available)."""
        if client_secret:  # chosen by a person: a slow, salted hash
            secret, secret_hash = client_secret, await self._off_loop(hash_password, client_secret)
        else:
            secret = new_client_secret()
            secret_hash = hash_secret(secret)
        record = await self.store.create_api_key(
            client_id=client_id or new_client_id(),
            secret_hash=secret_hash,
            cluster=cluster,
            role=role.value,
            description=description,
            created_by=created_by,
            expires_at=expires_at,
        )
        return record, secret

    async def _ensure_configured_admin(self, client_id: str, secret: str) -> None:
        """FLOE_ADMIN_CLIENT_ID/SECRET are authoritative: the key exists with that secret."""
        existing = await self.store.get_api_key(client_id)
        if existing is None:
            try:
                await self.create_key(
                    cluster=None,
                    role=Role.ADMIN,
                    description="admin from FLOE_ADMIN_CLIENT_ID",
                    created_by="floe",
                    client_id=client_id,
                    client_secret=secret,
                )
                log.info("admin key %s created from the environment", client_id)
            except AlreadyExists:  # another worker created it at the same moment
                pass
            return
        if existing.role != Role.ADMIN.value or existing.cluster is not None:
            log.warning("FLOE_ADMIN_CLIENT_ID %s names a key that is not a global admin key", client_id)
            return
        if not await self._off_loop(verify_secret, secret, existing.secret_hash):
            await self.store.set_api_key_secret(client_id, await self._off_loop(hash_password, secret))
            log.warning("admin key %s: secret reset from FLOE_ADMIN_CLIENT_SECRET", client_id)

    async def rotate_secret(self, client_id: str) -> str:
        secret = new_client_secret()
        if not await self.store.set_api_key_secret(client_id, hash_secret(secret)):
            raise NotFound(f"API key does not exist or is revoked: {client_id}")
        # Tokens of the old secret carry its version: they stop here at once, elsewhere within
        # KEY_STATE_CACHE_SECONDS, as after revocation.
        self.forget_key(client_id)
        return secret

    def forget_key(self, client_id: str) -> None:
        """Drop what this process cached of a key that was just revoked or given a new secret: here it
        takes effect at once (other processes read it again within KEY_STATE_CACHE_SECONDS)."""
        self._key_state.pop(client_id, None)
        self._client_state.pop(client_id, None)
        self._slow_verified.pop(client_id, None)

    async def bootstrap_admin(self) -> None:
        """Make sure a global admin key exists.

        With FLOE_ADMIN_CLIENT_ID/FLOE_ADMIN_CLIENT_SECRET set, that key (created or given that secret).
        Otherwise, on first start (no keys at all), a generated one, written to `$FLOE_HOME/admin.json`
        (mode 0600)."""
        await self.signer.load()
        if self.oidc is not None:
            await self.oidc.warm_up()
        settings = self.settings
        if settings.admin_client_id and settings.admin_client_secret:
            await self._ensure_configured_admin(settings.admin_client_id, settings.admin_client_secret)
            return
        if await self.store.count_api_keys() > 0:
            return
        path = admin_credentials_path(settings.home)
        if path.exists():  # another worker of this home bootstrapped at the same moment
            return
        record, secret = await self.create_key(
            cluster=None, role=Role.ADMIN, description="bootstrap admin", created_by="floe"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"client_id": record.client_id, "client_secret": secret}, fh)
        os.chmod(path, 0o600)
        log.info("bootstrap admin key %s written to %s", record.client_id, path)


def admin_credentials_path(home: Path) -> Path:
    return home / "admin.json"
