"""Who is calling and what they may do.

A principal is an API key's identity: a global administrator, or a key bound to one Kafka cluster with a
role. A cluster's tables live in the namespace named after the cluster (and namespaces below it) in the
cluster's warehouse; a cluster key sees nothing else — other namespaces answer as if they did not exist.

| role   | read (list, load, credentials) | write (commit, create tables) | drop, rename, manage keys |
| reader | yes                            | no                            | no                        |
| writer | yes                            | yes                           | no                        |
| admin  | yes                            | yes                           | yes                       |
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


def visible_namespaces(principal: Principal, keys: list[str]) -> list[str]:
    """Filter a namespace listing to what the principal may see."""
    if principal.is_admin:
        return keys
    return [k for k in keys if principal.owns(k)]


# With FLOE_AUTH=none every caller is served as this administrator.
ANONYMOUS_ADMIN = Principal(subject="anonymous", role=Role.ADMIN)
