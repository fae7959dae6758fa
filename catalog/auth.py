"""Who is calling and what they may do.

A principal is an API key's identity: a global administrator, or a key bound to one Kafka cluster with a
role. A cluster's tables live in the namespace named after the cluster (and namespaces below it) in the
cluster's warehouse; a cluster key sees nothing else — other namespaces answer as if they did not exist.

| role   | read (list, load, credentials) | write (commit, create tables) | drop, rename, manage keys |
| reader | yes                            | no                            | no                        |
| writer | yes                            | yes                           | no                        |
| admin  | yes                            | yes                           | yes                       |

Management follows the same rule: global administrators manage everything; a cluster's admin keys manage
that cluster's keys and read its audit log; its writer and admin keys record maintenance passes and read
its pipeline. Every check of who may do what lives in this module; services call it, and the HTTP layer
adds a guard (`catalog.api.guards.admin_only`) on routes only global administrators may call.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from catalog.errors import Forbidden, NoSuchNamespace, NoSuchWarehouse

SEPARATOR = "\x1f"


class Action(StrEnum):
    READ = "read"
    WRITE = "write"
    CREATE = "create"
    DROP = "drop"
    MANAGE = "manage"


class Role(StrEnum):
    READER = "reader"
    WRITER = "writer"
    ADMIN = "admin"


_ALLOWED: dict[Role, frozenset[Action]] = {
    Role.READER: frozenset({Action.READ}),
    Role.WRITER: frozenset({Action.READ, Action.WRITE, Action.CREATE}),
    Role.ADMIN: frozenset(Action),
}


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str
    role: Role
    cluster: str | None = None
    warehouse: str | None = None

    @property
    def is_admin(self) -> bool:
        """A global administrator: an admin key bound to no cluster."""
        return self.cluster is None and self.role is Role.ADMIN

    def owns(self, namespace_key: str) -> bool:
        """Whether the namespace is the principal's cluster namespace or below it."""
        if self.cluster is None:
            return self.is_admin
        return namespace_key == self.cluster or namespace_key.startswith(self.cluster + SEPARATOR)


def authorize(principal: Principal, action: Action, warehouse: str, namespace_key: str | None = None) -> None:
    """Raise unless `principal` may do `action` in `warehouse` (on `namespace_key`, when given).

    Outside its cluster a key gets "does not exist" rather than "forbidden", so it learns nothing about
    other clusters; inside, an action its role lacks is `Forbidden`.
    """
    if principal.is_admin:
        return
    if principal.cluster is None:
        raise Forbidden(f"Key {principal.subject} has no cluster and is not an administrator")
    if warehouse != principal.warehouse:
        raise NoSuchWarehouse(f"Warehouse does not exist: {warehouse}")
    if namespace_key is not None and not principal.owns(namespace_key):
        raise NoSuchNamespace(f"Namespace does not exist: {namespace_key.replace(SEPARATOR, '.')}")
    if namespace_key is None and action is not Action.READ:
        raise Forbidden(f"Key {principal.subject} may only manage namespaces below {principal.cluster}")
    if action not in _ALLOWED[principal.role]:
        raise Forbidden(f"Role {principal.role.value} of key {principal.subject} may not {action.value}")


def require_admin(principal: Principal, what: str = "do this") -> None:
    """Raise `Forbidden` unless `principal` is a global administrator."""
    if not principal.is_admin:
        raise Forbidden(f"Only global administrators may {what}")


def authorize_namespace_creation(principal: Principal, warehouse: str, namespace_key: str) -> None:
    """Creating outside its cluster is refused outright (not "does not exist"): the name says nothing
    about others."""
    authorize(principal, Action.READ, warehouse)
    if not principal.owns(namespace_key):
        raise Forbidden(f"Key {principal.subject} may only create namespaces below {principal.cluster}")
    authorize(principal, Action.CREATE, warehouse, namespace_key)


def authorize_key_management(principal: Principal, cluster: str | None) -> None:
    """Global admins manage every key; a cluster's admin keys manage that cluster's keys."""
    if principal.is_admin:
        return
    if cluster is None or principal.cluster != cluster:
        raise Forbidden("Keys may only be managed by global administrators or the cluster's admins")
    if principal.role is not Role.ADMIN:
        raise Forbidden(f"Role {principal.role.value} may not manage keys")


def managed_cluster(principal: Principal, requested: str | None) -> str | None:
    """The cluster whose keys or audit log a listing covers: a cluster admin's own cluster whatever it
    asked for, a global administrator's choice (None: all)."""
    if principal.is_admin:
        return requested
    authorize_key_management(principal, principal.cluster)
    return principal.cluster


def sees_cluster(principal: Principal, cluster: str | None) -> bool:
    """Whether a cluster (or a key of it) exists for `principal`: others answer "does not exist"."""
    return principal.is_admin or (cluster is not None and cluster == principal.cluster)


def maintenance_scope(
    principal: Principal, warehouse: str | None, namespace_key: str | None
) -> tuple[str | None, str | None]:
    """(warehouse, cluster namespace) a listing of maintenance passes is confined to: a cluster key
    sees the passes of its cluster's namespaces only (in its warehouse unless it names another)."""
    if principal.is_admin:
        return warehouse, None
    if principal.cluster is None:
        raise Forbidden(f"Key {principal.subject} has no cluster and is not an administrator")
    warehouse = warehouse or principal.warehouse
    assert warehouse is not None
    authorize(principal, Action.READ, warehouse, namespace_key)
    return warehouse, principal.cluster


def authorize_pipeline_read(principal: Principal) -> None:
    if principal.is_admin:
        return
    if principal.cluster is None or principal.role not in (Role.WRITER, Role.ADMIN):
        raise Forbidden("Only administrators and a cluster's writer or admin keys may read the pipeline")


def visible_namespaces(principal: Principal, keys: list[str]) -> list[str]:
    """Filter a namespace listing to what the principal may see."""
    if principal.is_admin:
        return keys
    return [k for k in keys if principal.owns(k)]


# With FLOE_AUTH=none every caller is served as this administrator.
ANONYMOUS_ADMIN = Principal(subject="anonymous", role=Role.ADMIN)
