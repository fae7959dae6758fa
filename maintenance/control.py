"""floe's control plane as the maintenance worker sees it: the applied pipeline, the warehouses to
maintain, and the pass records it writes (management API, OAuth2 client credentials)."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from catalog.admin_client import error_message


class ControlPlaneError(Exception):
    """floe refused or could not answer a management call."""


class ControlPlane:
    """A thread-safe management API client; the token is renewed before it expires or on a 401."""

    def __init__(self, url: str, client_id: str, client_secret: str, timeout: float = 30) -> None:
        self.url = url.rstrip("/")
        self.client_id = client_id
        self._secret = client_secret
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
                    raise ControlPlaneError(f"Cannot reach floe at {self.url}: {exc}") from exc
                if response.status_code != 200:
                    status, message = response.status_code, error_message(response)
                    raise ControlPlaneError(f"floe refused the maintenance credentials ({status}): {message}")
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
                raise ControlPlaneError(f"Cannot reach floe at {self.url}: {exc}") from exc
            if response.status_code != 401 or renew:
                return response
        raise AssertionError("unreachable")

    def pipeline(self) -> dict[str, Any] | None:
        """The applied floe.yaml (None before the first apply, or when this key may not read it)."""
        response = self.request("GET", "/management/v1/pipeline")
        if response.status_code in (403, 404):
            return None
        if response.status_code >= 400:
            raise ControlPlaneError(
                f"GET pipeline failed ({response.status_code}): {error_message(response)}"
            )
        body: dict[str, Any] = response.json()
        return body

    def cluster_warehouses(self) -> list[str]:
        """The warehouses of floe's clusters (administrators only; others get none)."""
        response = self.request("GET", "/management/v1/clusters")
        if response.status_code >= 400:
            return []
        return sorted({str(c["warehouse"]) for c in response.json().get("clusters", [])})

    def record_pass(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.request("POST", "/management/v1/maintenance/passes", json=body)
        if response.status_code >= 400:
            raise ControlPlaneError(
                f"Recording the maintenance pass failed ({response.status_code}): {error_message(response)}"
            )
        recorded: dict[str, Any] = response.json()
        return recorded

    def passes(self, **params: str | int) -> list[dict[str, Any]]:
        response = self.request("GET", "/management/v1/maintenance/passes", params=params)
        if response.status_code >= 400:
            raise ControlPlaneError(f"GET passes failed ({response.status_code}): {error_message(response)}")
        passes: list[dict[str, Any]] = response.json()["passes"]
        return passes

    def close(self) -> None:
        self._http.close()
