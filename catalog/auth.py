"""Who is calling: the principal every route resolves through one dependency.

The catalog issue serves every caller as an anonymous administrator; authentication (OAuth2 tokens,
API keys per cluster) and the authorization rules plug in here without touching the routes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    READ = "read"
    WRITE = "write"
    CREATE = "create"
    DROP = "drop"
    MANAGE = "manage"


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str
    is_admin: bool = False


ANONYMOUS_ADMIN = Principal(subject="anonymous", is_admin=True)


def authorize(principal: Principal, action: Action, warehouse: str, namespace_key: str | None = None) -> None:
    """Raise `Forbidden` (or answer as not found) when `principal` may not do `action`.

    Every service operation calls this; with authentication off every principal is an administrator.
    """
    if principal.is_admin:
        return
