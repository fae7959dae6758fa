"""Database faults: the database unreachable, a connection it dropped, or no answer in time.

They are not failures of a statement (a constraint, a bad value): the same request can succeed once the
database is back, so the API answers them 503 with `Retry-After` (`catalog.api.errors`), and a commit
whose pointer swap met one does not know whether the swap landed (`CommitStateUnknownException`).
"""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import exc as sa_exc

from catalog.errors import ServiceUnavailable

# What clients are told to wait before retrying (`Retry-After`): a restart or failover takes seconds.
RETRY_AFTER_SECONDS = 5
UNAVAILABLE_MESSAGE = "The catalog database is unavailable; retry later"

# SQLSTATEs of a connection's loss or refusal, not of the statement: class 08 (connection exception),
# the server shutting down or starting (57P01-57P03), too many connections (53300), and a statement
# cancelled by `statement_timeout` (57014).
_FAULT_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300", "57014"})
# Those after which the same connection cannot be used again, nor its statement's outcome known.
_LOST_SQLSTATES = frozenset({"57P01", "57P02"})
_CHAIN_DEPTH = 6
# asyncpg's refusals to use a connection, raised before anything is sent: it is closed, or its protocol
# is stuck after the server's last words (a terminated backend's FATAL arrived before its EOF).
_CLIENT_SIDE = (asyncpg.InterfaceError, asyncpg.InternalClientError)


class DatabaseUnavailable(ServiceUnavailable):
    """No statement reached the database (it could not be connected to in time): nothing was applied."""

    def __init__(self, message: str = UNAVAILABLE_MESSAGE) -> None:
        super().__init__(message)


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what it wraps (SQLAlchemy's `orig`, then the causes), outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < _CHAIN_DEPTH and current not in seen:
        seen.append(current)
        current = getattr(current, "orig", None) or current.__cause__
    return seen


def _sqlstate(exc: BaseException) -> str:
    return str(getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None) or "")


def database_fault(exc: BaseException) -> bool:
    """Whether `exc` (raised by database code) means the database is unreachable, dropped the
    connection or did not answer within its timeout."""
    for seen in _chain(exc):
        if isinstance(seen, DatabaseUnavailable | TimeoutError | ConnectionError | sa_exc.TimeoutError):
            return True  # TimeoutError: asyncpg's connect and command timeouts; sa_exc: the pool's wait
        if isinstance(seen, (*_CLIENT_SIDE, asyncpg.PostgresConnectionError)):
            return True  # "connection is closed", "connection was closed in the middle of operation"
        if isinstance(seen, sa_exc.DBAPIError) and seen.connection_invalidated:
            return True
        state = _sqlstate(seen)
        if state.startswith("08") or state in _FAULT_SQLSTATES:
            return True
    return False


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` says the connection itself is gone (closed by the server, a restart, a terminated
    backend), as opposed to a statement that ran out of time on a live or unresponsive server."""
    for seen in _chain(exc):
        if isinstance(seen, TimeoutError):
            return False
        if isinstance(seen, (ConnectionError, *_CLIENT_SIDE, asyncpg.PostgresConnectionError)):
            return True
        state = _sqlstate(seen)
        if state.startswith("08") or state in _LOST_SQLSTATES:
            return True
    return False


def refused_before_sending(exc: BaseException) -> bool:
    """Whether asyncpg refused to use the connection before sending anything (so a statement, even a
    write, can run again on another connection)."""
    return isinstance(exc, _CLIENT_SIDE)


def write_outcome_unknown(exc: BaseException) -> bool:
    """Whether a write that raised `exc` may have been applied or not: the database failed (the
    connection lost, a timeout) once the statement was on its way. `DatabaseUnavailable` says nothing
    was sent; an error the database answered with (a constraint) says it was not applied."""
    if isinstance(exc, DatabaseUnavailable):
        return False
    return isinstance(exc, sa_exc.DBAPIError) or database_fault(exc)
