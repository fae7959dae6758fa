"""API keys and signing keys as the management API manages them (token issuing and checking is
`catalog.service.security.AuthService`'s)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from catalog.auth import Principal, Role, authorize_key_management, managed_cluster, require_admin
from catalog.errors import BadRequest, NotFound
from catalog.service.security import AuthService
from catalog.store.interfaces import ApiKeyStore
from catalog.store.security import ApiKeyRecord

# Beyond a century an expiry means "never" and only risks overflowing dates.
MAX_KEY_LIFETIME_SECONDS = 100 * 366 * 86400


@dataclass(frozen=True, slots=True)
class NewKey:
    """What a caller asks of a new key; `expires_in_seconds` wins over `expires_at`."""

    role: str
    cluster: str | None = None
    description: str = ""
    expires_at: datetime | None = None
    expires_in_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key with its secret: the only time the secret is available."""

    record: ApiKeyRecord
    secret: str


def _role(value: str) -> Role:
    try:
        return Role(value)
    except ValueError as exc:
        raise BadRequest(f"Invalid role {value!r}: expected reader, writer or admin") from exc


def _expiry(request: NewKey) -> datetime | None:
    expires_at = request.expires_at
    if request.expires_in_seconds is not None:
        if request.expires_in_seconds <= 0:
            raise BadRequest("expires_in_seconds must be positive")
        if request.expires_in_seconds > MAX_KEY_LIFETIME_SECONDS:
            raise BadRequest(f"expires_in_seconds must be at most {MAX_KEY_LIFETIME_SECONDS} (a century)")
        expires_at = datetime.now(UTC) + timedelta(seconds=request.expires_in_seconds)
    if expires_at is not None and expires_at.tzinfo is None:
        expires_at = expires_at.replace(tzinfo=UTC)
    return expires_at


class KeyService:
    def __init__(self, store: ApiKeyStore, auth: AuthService) -> None:
        self.store = store
        self.auth = auth

    async def create(self, principal: Principal, request: NewKey) -> IssuedKey:
        role = _role(request.role)
        authorize_key_management(principal, request.cluster)
        if "\x00" in request.description:  # PostgreSQL text cannot hold it: refused on every backend
            raise BadRequest("Invalid description: must not contain NUL")
        if request.cluster is None and role is not Role.ADMIN:
            raise BadRequest("A key without a cluster must be a global admin key (role admin)")
        record, secret = await self.auth.create_key(
            cluster=request.cluster,
            role=role,
            description=request.description,
            created_by=principal.subject,
            expires_at=_expiry(request),
        )
        return IssuedKey(record, secret)

    async def list(self, principal: Principal, cluster: str | None) -> list[ApiKeyRecord]:
        """The keys of `cluster` (None: all) for a global administrator; a cluster admin's own."""
        return await self.store.list_api_keys(managed_cluster(principal, cluster))

    async def _manageable(self, principal: Principal, client_id: str) -> ApiKeyRecord:
        record = await self.store.get_api_key(client_id)
        if record is None or not (principal.is_admin or record.cluster == principal.cluster):
            raise NotFound(f"API key does not exist: {client_id}")
        authorize_key_management(principal, record.cluster)
        return record

    async def revoke(self, principal: Principal, client_id: str) -> None:
        """No new tokens, and tokens already issued stop working within seconds."""
        await self._manageable(principal, client_id)
        await self.store.revoke_api_key(client_id)
        self.auth.forget_key(client_id)

    async def rotate(self, principal: Principal, client_id: str) -> IssuedKey:
        """A new secret; the old one stops working at once."""
        record = await self._manageable(principal, client_id)
        if record.revoked_at is not None:
            raise BadRequest(f"API key {client_id} is revoked")
        return IssuedKey(record, await self.auth.rotate_secret(client_id))

    async def rotate_signing_key(self, principal: Principal) -> str:
        """Sign new tokens with a new key (its id comes back); earlier tokens stay valid until they expire."""
        require_admin(principal)
        return await self.auth.signer.rotate()
