"""Commands that talk to a running floe server: its URL, the admin credentials, management API calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import click

from catalog.cli.settings import client_settings
from catalog.client import ClientError, FloeClient, admin_credentials

Result = TypeVar("Result")


def cli_credentials() -> tuple[str, str]:
    """The admin credentials (`admin_credentials`), or a command-line error saying what is missing."""
    try:
        return admin_credentials()
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc


@contextmanager
def management_client() -> Iterator[FloeClient]:
    """A client of FLOE_URL with the admin credentials; any `ClientError` inside (missing credentials,
    refused ones, a failed call) is a command-line error with the server's message."""
    try:
        with FloeClient(client_settings().url, *admin_credentials()) as client:
            yield client
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc


def call(operation: Callable[[FloeClient], Result]) -> Result:
    """One management call, `operation(client)`, as a command-line command makes it."""
    with management_client() as client:
        return operation(client)
