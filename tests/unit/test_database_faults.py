"""Which database errors are faults (503, Retry-After), which leave a write's outcome unknown, and which
let a statement run again on another connection (issue 30, items 3, 4 and 5)."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
import msgspec
import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from catalog.api.errors import failure_answer
from catalog.errors import CommitStateUnknown, NotAuthorized
from catalog.store.database_faults import (
    DatabaseUnavailable,
    connection_lost,
    database_fault,
    refused_before_sending,
    write_outcome_unknown,
)


def _wrapped(orig: BaseException, *, invalidated: bool = False) -> DBAPIError:
    """What SQLAlchemy raises for `orig` (the asyncpg error is the `orig`'s cause there)."""
    adapted = Exception(str(orig))
    adapted.__cause__ = orig
    return OperationalError("SELECT 1", {}, adapted, connection_invalidated=invalidated)


# (error, a fault, the connection is gone, refused before anything was sent, a write's outcome unknown)
CASES = [
    (TimeoutError(), True, False, False, True),  # asyncpg's command or connect timeout
    (ConnectionRefusedError(), True, True, False, True),
    (asyncpg.exceptions.ConnectionDoesNotExistError("closed mid-operation"), True, True, False, True),
    (asyncpg.exceptions.AdminShutdownError("terminating connection"), True, True, False, True),
    (asyncpg.exceptions.CannotConnectNowError("starting up"), True, False, False, True),
    (asyncpg.exceptions.QueryCanceledError("statement timeout"), True, False, False, True),
    (asyncpg.exceptions.TooManyConnectionsError("too many"), True, False, False, True),
    (asyncpg.InterfaceError("connection is closed"), True, True, True, True),
    (asyncpg.InternalClientError("another operation (2) is in progress"), True, True, True, True),
    (_wrapped(asyncpg.exceptions.AdminShutdownError("x")), True, True, False, True),
    (_wrapped(ValueError("x"), invalidated=True), True, False, False, True),
    (DatabaseUnavailable(), True, False, False, False),  # nothing was sent
    (asyncpg.exceptions.UniqueViolationError("duplicate"), False, False, False, False),
    (IntegrityError("INSERT", {}, Exception("duplicate")), False, False, False, True),
    (ValueError("a bug"), False, False, False, False),
]


@pytest.mark.parametrize(("exc", "fault", "lost", "unsent", "unknown"), CASES)
def test_classification(exc: BaseException, fault: bool, lost: bool, unsent: bool, unknown: bool) -> None:
    assert database_fault(exc) is fault
    assert connection_lost(exc) is lost
    assert refused_before_sending(exc) is unsent
    assert write_outcome_unknown(exc) is unknown


@pytest.mark.parametrize(
    "exc", [TimeoutError(), _wrapped(asyncpg.exceptions.AdminShutdownError("x")), DatabaseUnavailable()]
)
def test_a_fault_is_answered_503_with_retry_after(exc: Exception) -> None:
    status, body, headers = failure_answer(exc, "GET", "/v1/default/namespaces")
    assert status == 503
    assert msgspec.json.decode(body)["error"]["type"] == "ServiceUnavailableException"
    assert int(headers["Retry-After"]) > 0


def test_other_failures_keep_their_answers() -> None:
    status, body, headers = failure_answer(NotAuthorized("no"), "GET", "/")
    assert (status, headers) == (401, {"WWW-Authenticate": 'Bearer realm="floe"'})
    status, body, headers = failure_answer(CommitStateUnknown("unknown"), "POST", "/")
    assert (status, msgspec.json.decode(body)["error"]["type"], headers) == (
        500,
        "CommitStateUnknownException",
        {},
    )
    status, body, headers = failure_answer(ValueError("a bug"), "GET", "/")
    assert (status, headers) == (500, {})
    assert msgspec.json.decode(body)["error"]["type"] == "ServiceFailureException"
