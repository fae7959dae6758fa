"""API keys and signing keys as the management API manages them (token issuing and checking is
`catalog.service.security.AuthService`'s)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from catalog.auth import Principal, Role, authorize_key_management, managed_cluster, require_admin
from catalog.errors import BadRequest, NotFound, QuotaExceeded
from catalog.security.secrets import new_client_id
from catalog.service.security import AuthService
from catalog.store.audit_context import name_target
from catalog.store.interfaces import ApiKeyStore
from catalog.store.security import ApiKeyRecord

# What a cluster-scoped key sees instead of a principal outside its cluster (a global administrator, the
# server itself, another cluster's key): it must not learn other tenants' or the operator's client ids.
REDACTED_PRINCIPAL = "operator"

# A revoked key counts against its cluster's key quota this long after it was revoked.
REVOKED_KEYS_COUNT_FOR = timedelta(days=1)
# Beyond a century an expiry means "never" and only risks overflowing dates.
MAX_KEY_LIFETIME_SECONDS = 100 * 366 * 86400
MAX_DESCRIPTION_CHARS = 500


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


async def visible_principals(
    store: ApiKeyStore, principal: Principal, subjects: Iterable[str]
) -> dict[str, str]:
    """Each of `subjects` (client ids recorded as who did something) as `principal` may see it: itself
    when it is `principal` or a key of `principal`'s cluster, else `REDACTED_PRINCIPAL`. A global
    administrator sees every one."""
    names = set(subjects)
    if principal.is_admin:
        return {name: name for name in names}
    shown: dict[str, str] = {}
    for name in names:
        visible = name == principal.subject
        if not visible and principal.cluster is not None and name:
            record = await store.get_api_key(name)
            visible = record is not None and record.cluster == principal.cluster
        shown[name] = name if visible else REDACTED_PRINCIPAL
    return shown


async def _with_visible_creators(
    store: ApiKeyStore, principal: Principal, records: list[ApiKeyRecord]
) -> list[ApiKeyRecord]:
    """`records` (keys of `principal`'s cluster) with each `created_by` outside that cluster redacted."""
    if principal.is_admin:
        return records
    # The listed keys are the cluster's own: no lookup needed for keys created by one of them.
    own = {r.client_id for r in records}
    names = await visible_principals(store, principal, {r.created_by for r in records} - own)
    names.update((client_id, client_id) for client_id in own)
    return [replace(r, created_by=names[r.created_by]) for r in records]


class KeyService:
    def __init__(self, store: ApiKeyStore, auth: AuthService) -> None:
        self.store = store
        self.auth = auth

    async def create(self, principal: Principal, request: NewKey) -> IssuedKey:
        role = _role(request.role)
        authorize_key_management(principal, request.cluster)
        if "\x00" in request.description:  # PostgreSQL text cannot hold it: refused on every backend
            raise BadRequest("Invalid description: must not contain NUL")
        if len(request.description) > MAX_DESCRIPTION_CHARS:  # the console's form allows as many
            raise BadRequest(f"Invalid description: at most {MAX_DESCRIPTION_CHARS} characters")
        if request.cluster is None and role is not Role.ADMIN:
            raise BadRequest("A key without a cluster must be a global admin key (role admin)")
        if request.cluster is not None:
            await self._check_quota(request.cluster)
        client_id = new_client_id()
        # The audit entry names the new key (the request's path does not).
        name_target(f"client_id={client_id} cluster={request.cluster or '(global)'} role={role.value}")
        record, secret = await self.auth.create_key(
            client_id=client_id,
            cluster=request.cluster,
            role=role,
            description=request.description,
            created_by=principal.subject,
            expires_at=_expiry(request),
        )
        return IssuedKey(record, secret)

    async def _check_quota(self, cluster: str) -> None:
        """At most `FLOE_QUOTA_KEYS` keys of a cluster that are active or were revoked within a day:
        revoked keys are kept (the audit log names them), so a create-and-revoke loop adds at most the
        quota a day. Counted before the insert: creates racing for the cluster's last places can all
        pass (keys are made by hand, one at a time)."""
        limit = self.auth.settings.quota_keys
        since = datetime.now(UTC) - REVOKED_KEYS_COUNT_FOR
        records = await self.store.list_api_keys(cluster)
        held = sum(1 for r in records if r.revoked_at is None or r.revoked_at > since)
        if held >= limit:
            raise QuotaExceeded(
                f"Quota exceeded: cluster {cluster} already holds {held} keys (active, or revoked in the "
                f"last 24 hours), its quota of {limit} (FLOE_QUOTA_KEYS); revoke some and retry tomorrow, "
                "or ask the operator to raise it"
            )

    async def list(self, principal: Principal, cluster: str | None) -> list[ApiKeyRecord]:
        """The keys of `cluster` (None: all) for a global administrator; a cluster admin's own."""
        records = await self.store.list_api_keys(managed_cluster(principal, cluster))
        return await _with_visible_creators(self.store, principal, records)

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
        secret = await self.auth.rotate_secret(client_id)
        return IssuedKey((await _with_visible_creators(self.store, principal, [record]))[0], secret)

    async def rotate_signing_key(self, principal: Principal) -> str:
        """Sign new tokens with a new key (its id comes back); earlier tokens stay valid until they expire."""
        require_admin(principal)
        return await self.auth.signer.rotate()
