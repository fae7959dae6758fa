"""floe's control plane as the maintenance worker sees it: the applied pipeline, the warehouses to
maintain, and the pass records it writes (management API, OAuth2 client credentials)."""

from __future__ import annotations

from typing import Any

import httpx

from catalog.admin_client import ApiKeySession, error_message


class ControlPlaneError(Exception):
    """floe refused or could not answer a management call."""


class ControlPlane:
    """A thread-safe management API client with an API key (see `ApiKeySession`)."""

    def __init__(self, url: str, client_id: str, client_secret: str, timeout: float = 30) -> None:
        self._session = ApiKeySession(
            url, client_id, client_secret, error=ControlPlaneError, purpose="the maintenance", timeout=timeout
        )
        self.url = self._session.url

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The response of an authenticated call (after one token renewal on 401)."""
        return self._session.request(method, path, **kwargs)

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
        self._session.close()
