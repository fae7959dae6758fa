"""User errors on the command line: one clear message and exit status 1, never a Python traceback.

Commands raise `click.ClickException` for what they check themselves; `FloeGroup` turns the errors of
the environment that reach the top (no Java, floe or the database unreachable, credentials refused, a
port in use, a missing file) into the same one-line message. Anything else is a bug in floe and keeps
its traceback.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from catalog.client import ClientError
from runtime.java import JavaNotFound


def user_message(exc: BaseException) -> str | None:
    """The message for an error of the user's environment, or None when `exc` is not one."""
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, JavaNotFound | ClientError):
        return str(exc)
    if isinstance(exc, DBAPIError):
        # The driver's own message: the statement and parameters are not the user's concern.
        return f"database error: {str(exc.orig).strip().splitlines()[0] if exc.orig else exc}"
    if isinstance(exc, OSError):
        if exc.errno == errno.EADDRINUSE:
            return f"address already in use: {exc.strerror or exc} (is floe already running?)"
        if exc.filename is not None:
            return f"{exc.strerror or exc}: {exc.filename}"
        return str(exc.strerror or exc)
    return None


class FloeGroup(click.Group):
    """The `floe` group: user errors from any command end with one message, not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            message = user_message(exc)
            if message is None:
                raise
            raise click.ClickException(message) from exc


def port_option_error(port: int, option: str, host: str = "127.0.0.1") -> click.ClickException:
    """A port a command was told to listen on is taken."""
    return click.ClickException(
        f"port {port} on {host} is in use (is floe already running?); pass {option} to use another"
    )


@contextmanager
def database_errors(url: str) -> Iterator[None]:
    """Failures to reach or use the database at `url` as one message naming it (without a password)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError

    try:
        yield
    except (OSError, DBAPIError) as exc:
        where = make_url(url).render_as_string(hide_password=True)
        raise click.ClickException(f"Cannot use the database {where}: {user_message(exc)}") from exc
