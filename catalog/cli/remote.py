"""Commands that talk to a running floe server: its URL, the admin credentials, management API calls."""

from __future__ import annotations

import os
from typing import Any

import click

from catalog.admin_client import DEFAULT_URL, ClientError, ManagementClient, admin_credentials


def cli_credentials() -> tuple[str, str]:
    """The admin credentials (`admin_credentials`), or a command-line error saying what is missing."""
    try:
        return admin_credentials()
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc


def management_client() -> ManagementClient:
    """A management client of FLOE_URL with the admin credentials, or a command-line error."""
    try:
        client_id, client_secret = admin_credentials()
        return ManagementClient(os.environ.get("FLOE_URL", DEFAULT_URL), client_id, client_secret)
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc


def call(method: str, path: str, **kwargs: Any) -> Any:
    """One management API call; a failure is a command-line error with the server's message."""
    client = management_client()
    try:
        return client.call(method, path, **kwargs)
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        client.close()
