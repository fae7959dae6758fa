"""A small client of floe's management API for the CLI: authenticates with admin credentials."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8181"


class ClientError(Exception):
    """A refused or failed management call, with the server's message."""


def admin_credentials(env: dict[str, str] | None = None) -> tuple[str, str]:
    """FLOE_CLIENT_ID/FLOE_CLIENT_SECRET, else `$FLOE_HOME/admin.json` written at bootstrap."""
    env = dict(os.environ if env is None else env)
    if env.get("FLOE_CLIENT_ID") and env.get("FLOE_CLIENT_SECRET"):
        return env["FLOE_CLIENT_ID"], env["FLOE_CLIENT_SECRET"]
    path = Path(env.get("FLOE_HOME", ".floe")).expanduser() / "admin.json"
    try:
        data = json.loads(path.read_text())
        return str(data["client_id"]), str(data["client_secret"])
    except (OSError, ValueError, KeyError) as exc:
        raise ClientError(
            f"No admin credentials: set FLOE_CLIENT_ID and FLOE_CLIENT_SECRET, or run where {path} exists"
        ) from exc


class ApiKeySession:
    """A thread-safe client of floe's HTTP API for long-running services (ingestion, maintenance):
    an API key's token is fetched on first use and renewed a minute before it expires or when the
    server answers 401. Transport failures and refused credentials raise `error`."""

    def __init__(
        self,
        url: str,
        client_id: str,
        client_secret: str,
        *,
        error: type[Exception] = ClientError,
        purpose: str = "the",
        timeout: float = 30,
    ) -> None:
        self.url = url.rstrip("/")
        self.client_id = client_id
        self._secret = client_secret
        self._error = error
        self._purpose = purpose
        self._http = httpx.Client(base_url=self.url, timeout=timeout)
        self._token: str | None = None
        self._expires_at = 0.0
        self._lock = threading.Lock()

    def _authorization(self, *, renew: bool = False) -> str:
        with self._lock:
            if renew or self._token is None or time.monotonic() > self._expires_at - 60:
                try:
                    response = self._http.post(
                        "/v1/oauth/tokens",
                        data={
                            "grant_type": "client_credentials",
                            "client_id": self.client_id,
                            "client_secret": self._secret,
                        },
                    )
                except httpx.HTTPError as exc:
                    raise self._error(f"Cannot reach floe at {self.url}: {exc}") from exc
                if response.status_code != 200:
                    status, message = response.status_code, error_message(response)
                    raise self._error(f"floe refused {self._purpose} credentials ({status}): {message}")
                body = response.json()
                self._token = str(body["access_token"])
                self._expires_at = time.monotonic() + float(body.get("expires_in", 3600))
            return f"Bearer {self._token}"

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The response of an authenticated call (after one token renewal on 401)."""
        for renew in (False, True):
            try:
                response = self._http.request(
                    method, path, headers={"Authorization": self._authorization(renew=renew)}, **kwargs
                )
            except httpx.HTTPError as exc:
                raise self._error(f"Cannot reach floe at {self.url}: {exc}") from exc
            if response.status_code != 401 or renew:
                return response
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._http.close()


class ManagementClient:
    def __init__(self, url: str, client_id: str, client_secret: str, timeout: float = 30) -> None:
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout)
        try:
            response = self.http.post(
                "/v1/oauth/tokens",
                data={
                    "grant_type": "client_credentials",
                    "client_id": client_id,
                    "client_secret": client_secret,
                },
            )
        except httpx.HTTPError as exc:
            raise ClientError(f"Cannot reach floe at {url}: {exc}") from exc
        if response.status_code != 200:
            raise ClientError(f"Authentication failed ({response.status_code}): {error_message(response)}")
        self.http.headers["Authorization"] = f"Bearer {response.json()['access_token']}"

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, f"/management/v1{path}", **kwargs)
        if response.status_code >= 400:
            raise ClientError(f"{method} {path} failed ({response.status_code}): {error_message(response)}")
        return response.json() if response.content else None

    def close(self) -> None:
        self.http.close()


def error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body.get("error"), dict):
        return str(body["error"].get("message"))
    return str(body.get("error_description") or body.get("error") or body)
