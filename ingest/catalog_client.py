"""floe's control plane as the ingestion service sees it: the desired pipeline and committed offsets."""

from __future__ import annotations

from typing import Any

from catalog.admin_client import ApiKeySession, error_message


class CatalogUnavailable(Exception):
    """floe's catalog refused or could not answer a control-plane call."""


class CatalogClient:
    """A thread-safe client of floe's management API with an API key (see `ApiKeySession`)."""

    def __init__(self, url: str, client_id: str, client_secret: str, timeout: float = 30) -> None:
        self._session = ApiKeySession(
            url, client_id, client_secret, error=CatalogUnavailable, purpose="the ingestion", timeout=timeout
        )
        self.url = self._session.url

    def get(self, path: str, **params: str) -> Any:
        """GET a management API path; None when it answers 404."""
        response = self._session.request("GET", path, params=params)
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            status, message = response.status_code, error_message(response)
            raise CatalogUnavailable(f"GET {path} failed ({status}): {message}")
        return response.json()

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
        self._session.close()
