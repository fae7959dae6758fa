"""floe's control plane as the ingestion service sees it: the desired pipeline and committed offsets."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from catalog.admin_client import error_message


class CatalogUnavailable(Exception):
    """floe's catalog refused or could not answer a control-plane call."""


class CatalogClient:
    """A thread-safe client of floe's management API with an API key (OAuth2 client credentials).

    Tokens are fetched on first use and renewed before they expire or when the server answers 401.
    """

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
                    raise CatalogUnavailable(f"Cannot reach floe at {self.url}: {exc}") from exc
                if response.status_code != 200:
                    status, message = response.status_code, error_message(response)
                    raise CatalogUnavailable(f"floe refused the ingestion credentials ({status}): {message}")
                body = response.json()
                self._token = str(body["access_token"])
                self._expires_at = time.monotonic() + float(body.get("expires_in", 3600))
            return f"Bearer {self._token}"

    def get(self, path: str, **params: str) -> Any:
        """GET a management API path; None when it answers 404."""
        for renew in (False, True):
            try:
                response = self._http.get(
                    path, params=params, headers={"Authorization": self._authorization(renew=renew)}
                )
            except httpx.HTTPError as exc:
                raise CatalogUnavailable(f"Cannot reach floe at {self.url}: {exc}") from exc
            if response.status_code == 401 and not renew:
                continue
            if response.status_code == 404:
                return None
            if response.status_code >= 400:
                raise CatalogUnavailable(
                    f"GET {path} failed ({response.status_code}): {error_message(response)}"
                )
            return response.json()
        raise AssertionError("unreachable")

    def pipeline(self) -> dict[str, Any] | None:
        """The applied floe.yaml revision (None before the first `floe apply`)."""
        result: dict[str, Any] | None = self.get("/management/v1/pipeline")
        return result

    def kafka_offsets(
        self, warehouse: str, namespace: tuple[str, ...], table: str, topic: str
    ) -> dict[int, int]:
        """The next offset per partition of `topic` that the table has committed."""
        body = self.get(
            "/management/v1/kafka-offsets", warehouse=warehouse, namespace="\x1f".join(namespace), table=table
        )
        if body is None:
            raise CatalogUnavailable(f"Table {'.'.join(namespace)}.{table} does not exist in floe")
        for entry in body["topics"]:
            if entry["topic"] == topic:
                return {int(p["partition"]): int(p["next-offset"]) for p in entry["partitions"]}
        return {}

    def close(self) -> None:
        self._http.close()
