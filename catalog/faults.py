"""Test-only fault hooks: `FLOE_TEST_FAULT=<point>` kills the process (SIGKILL) when it reaches that
point, so a fault-injecting test can cut a request in an exact window instead of timing a kill -9.

Points: `crash-after-commit` (a table commit or create has committed its database transaction, its
answer is not sent yet); `crash-after-events-sent` (the events broker acknowledged commit events that
are still in the outbox). Never set it in production: the process dies on its first commit.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "FLOE_TEST_FAULT"
CRASH_AFTER_COMMIT = "crash-after-commit"
CRASH_AFTER_EVENTS_SENT = "crash-after-events-sent"

# Read once: checking a point costs one string comparison.
_ACTIVE = os.environ.get(FAULT_ENV, "")


def crash_point(point: str) -> None:
    """SIGKILL this process when `FLOE_TEST_FAULT` names `point` (no cleanup, no answer: a kill -9)."""
    if point == _ACTIVE:
        os.kill(os.getpid(), signal.SIGKILL)
