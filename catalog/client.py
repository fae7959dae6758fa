"""floe's HTTP client: the one typed client of the management API that the command line, the ingestion
service and the maintenance worker share.

Results are the server's own wire types (`catalog/wire.py`: msgspec structs, field for field the JSON,
so a command can print them back unchanged), named here as callers know them; failures are
`ClientError`s: `Unreachable`, `AuthenticationFailed`, `RequestFailed` (with `Forbidden` and
`NotFound`), `BadResponse` and `TableNotFound`. Authentication is OAuth2 client credentials on authlib's
httpx client: a token is fetched on first use, renewed a minute before it expires, and renewed once more
when the server answers 401 (a signing key rotated, a server restarted with a new key).
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx
import msgspec

from catalog import wire
from catalog.kafka_offsets import OFFSETS_CONFLICT

with warnings.catch_warnings():
    # authlib warns on import when it builds its client on httpx rather than httpx2 (floe depends on
    # httpx); its `deprecate` module installs an "always" filter on import, so import it first and put
    # "ignore" in front, or every `floe` command would print the warning.
    import authlib.deprecate  # type: ignore[import-untyped]  # noqa: F401

    warnings.simplefilter("ignore", DeprecationWarning)
    from authlib.integrations.base_client import OAuthError  # type: ignore[import-untyped]
    from authlib.integrations.httpx_client import OAuth2Client  # type: ignore[import-untyped]


def _transport_errors() -> tuple[type[Exception], ...]:
    """The transport failures of the HTTP library under authlib's client: httpx2 when installed (authlib
    prefers it), else httpx."""
    try:
        import httpx2  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return (httpx.HTTPError,)
    return (httpx.HTTPError, httpx2.HTTPError)


TRANSPORT_ERRORS = _transport_errors()

DEFAULT_URL = "http://127.0.0.1:8181"
TOKEN_PATH = "/v1/oauth/tokens"
MANAGEMENT = "/management/v1"
# A token is renewed this many seconds before it expires, so no call carries one about to lapse.
RENEW_BEFORE_SECONDS = 60
# Namespace levels in a query parameter are joined with the unit separator (as the server splits them).
NAMESPACE_SEPARATOR = "\x1f"

Result = TypeVar("Result")


# -- errors -----------------------------------------------------------------------------------------


class ClientError(Exception):
    """A refused or failed call to floe, with the server's message."""


class Unreachable(ClientError):
    """floe did not answer (connection refused, timeout, broken response)."""


class AuthenticationFailed(ClientError):
    """floe's token endpoint refused the client credentials."""

    def __init__(self, status: int, message: str, purpose: str) -> None:
        super().__init__(f"Authentication failed ({status}): floe refused {purpose} credentials: {message}")
        self.status = status


class RequestFailed(ClientError):
    """A management call answered with an error status; `errors`: a refused floe.yaml's problems, each
    (YAML path, message), as the server lists them."""

    def __init__(
        self, method: str, path: str, status: int, message: str, errors: Sequence[tuple[str, str]] = ()
    ) -> None:
        super().__init__(f"{method} {path} failed ({status}): {message}")
        self.method, self.path, self.status, self.message = method, path, status, message
        self.errors = tuple(errors)


class Forbidden(RequestFailed):
    """403: the key may not do this (not an administrator, another cluster's data)."""


class NotFound(RequestFailed):
    """404: no such cluster, key or pipeline."""


class BadResponse(ClientError):
    """floe answered with a body that is not what the call returns (a proxy's page, another version)."""


class TableNotFound(ClientError):
    """The table whose Kafka offsets were asked for does not exist in floe."""


# -- results ----------------------------------------------------------------------------------------
# The server's own wire types (catalog/wire.py), under the names callers of the client know them by.

Cluster = wire.Cluster
ApiKey = wire.ApiKey
IssuedKey = wire.ApiKeyWithSecret  # a key just created or rotated, with its secret (shown only this once)
AuditEntry = wire.AuditRecord
AuditPage = wire.ListAuditResponse
PlannedTable = wire.PlannedTable
ApplyOutcome = wire.ApplyPipelineResponse
PipelineTable = wire.PipelineTable
Pipeline = wire.PipelineResponse
PartitionOffset = wire.PartitionOffset
TopicOffsets = wire.TopicOffsets
SnapshotAt = wire.SnapshotAtResponse
TableCounts = wire.TableStats
MaintenanceAction = wire.MaintenanceAction
PassRecord = wire.MaintenancePassReport  # a maintenance pass as the worker reports it
MaintenancePass = wire.MaintenancePass


@dataclass(frozen=True, slots=True)
class TransactionOutcome:
    """floe's answer to a multi-table commit (`FloeClient.commit_transaction`): `status` is None when
    no answer came (the commit may or may not have landed)."""

    status: int | None
    detail: str = ""

    @property
    def committed(self) -> bool:
        return self.status in (200, 204)

    @property
    def refused(self) -> bool:
        """409: a requirement or the offsets fence failed, and nothing of the transaction landed."""
        return self.status == 409

    @property
    def fenced(self) -> bool:
        """Refused by the Kafka offsets fence: another ingestion wrote (or this one already wrote) the
        batch's records."""
        return self.refused and OFFSETS_CONFLICT in self.detail

    @property
    def invalid(self) -> bool:
        """Another 4xx: the request itself is wrong (sending it again will not help)."""
        return self.status is not None and 400 <= self.status < 500 and self.status != 409

    @property
    def unknown(self) -> bool:
        """Whether it landed is unknown: no answer, or a server error."""
        return self.status is None or self.status >= 500

    def __str__(self) -> str:
        if self.status is None:
            return self.detail
        return f"HTTP {self.status}: {self.detail[:200]}"


class HttpResponse(Protocol):
    """What floe reads of a response (httpx's or httpx2's, whichever authlib's client is built on)."""

    @property
    def status_code(self) -> int: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


# -- credentials ------------------------------------------------------------------------------------


def admin_credentials(env: Mapping[str, str] | None = None) -> tuple[str, str]:
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


def error_message(response: HttpResponse) -> str:
    """The server's message in an error response (Iceberg error shape or OAuth2 error), else its text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if not isinstance(body, dict):
        return str(body)
    if isinstance(body.get("error"), dict):
        return str(body["error"].get("message"))
    return str(body.get("error_description") or body.get("error") or body)


def config_errors(response: HttpResponse) -> list[tuple[str, str]]:
    """(YAML path, message) of each problem a refused floe.yaml has (`error.errors`), else none."""
    try:
        body = response.json()
        listed = body["error"]["errors"]
    except (ValueError, KeyError, TypeError):
        return []
    if not isinstance(listed, list):
        return []
    return [(str(e.get("path", "")), str(e.get("message", ""))) for e in listed[:1000] if isinstance(e, dict)]


# -- the client -------------------------------------------------------------------------------------


class FloeClient:
    """A thread-safe client of floe's management API with OAuth2 client credentials.

    `purpose` names the credentials in an authentication error ("the ingestion" → "floe refused the
    ingestion credentials")."""

    def __init__(
        self, url: str, client_id: str, client_secret: str, *, purpose: str = "the", timeout: float = 30
    ) -> None:
        self.url = url.rstrip("/")
        self.client_id = client_id
        self._purpose = purpose
        self._http: Any = OAuth2Client(
            client_id,
            client_secret,
            token_endpoint_auth_method="client_secret_post",
            token_endpoint=TOKEN_PATH,
            grant_type="client_credentials",
            leeway=RENEW_BEFORE_SECONDS,
            base_url=self.url,
            timeout=timeout,
        )
        self._http.register_compliance_hook("access_token_response", self._check_token_response)
        # authlib's sync client renews without a lock: one renewal at a time across the caller's threads.
        self._token_lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> FloeClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- transport ----------------------------------------------------------------------------------

    def _check_token_response(self, response: HttpResponse) -> HttpResponse:
        if response.status_code != 200:
            raise AuthenticationFailed(response.status_code, error_message(response), self._purpose)
        return response

    def _bearer(self, *, renew: bool) -> object:
        """The token's request signer; a new token when `renew`, none yet, or the current one expiring."""
        with self._token_lock:
            try:
                if renew or not self._http.token:
                    self._http.fetch_token()
                else:
                    self._http.ensure_active_token(self._http.token)
            except TRANSPORT_ERRORS as exc:
                raise Unreachable(f"Cannot reach floe at {self.url}: {exc}") from exc
            except OAuthError as exc:  # a 200 whose body is an OAuth2 error rather than a token
                raise AuthenticationFailed(200, str(exc), self._purpose) from exc
            # The signer is shared and reads the current token when a request is sent.
            auth: object = self._http.token_auth
            return auth

    def authenticate(self) -> None:
        """Fetch a token now: `Unreachable` when floe does not answer, `AuthenticationFailed` when it
        refuses the credentials (services check this before starting their work)."""
        self._bearer(renew=True)

    def send(
        self, method: str, path: str, *, params: Mapping[str, str | int] | None = None, body: Any = None
    ) -> HttpResponse:
        """The response of an authenticated call to `path` (after one token renewal on 401)."""
        content = None if body is None else msgspec.json.encode(body)
        headers = None if body is None else {"Content-Type": "application/json"}
        for renew in (False, True):
            auth = self._bearer(renew=renew)
            try:
                response: HttpResponse = self._http.request(
                    method, path, params=params, content=content, headers=headers, auth=auth
                )
            except TRANSPORT_ERRORS as exc:
                raise Unreachable(f"Cannot reach floe at {self.url}: {exc}") from exc
            if response.status_code != 401 or renew:
                return response
        raise AssertionError("unreachable")

    def commit_transaction(self, prefix: str, changes: Sequence[Any]) -> TransactionOutcome:
        """POST the table changes to `/v1/{prefix}/transactions/commit` (all land or none)."""
        try:
            response = self.send(
                "POST", f"/v1/{prefix}/transactions/commit", body={"table-changes": list(changes)}
            )
        except ClientError as exc:
            return TransactionOutcome(None, str(exc))
        return TransactionOutcome(response.status_code, response.text)

    def _call(
        self,
        method: str,
        path: str,
        result: type[Result],
        *,
        params: Mapping[str, str | int | None] | None = None,
        body: Any = None,
    ) -> Result:
        """A management call (`path` under /management/v1) decoded as `result`; `RequestFailed` on an
        error status."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        response = self.send(method, MANAGEMENT + path, params=query, body=body)
        if response.status_code >= 400:
            failure = {403: Forbidden, 404: NotFound}.get(response.status_code, RequestFailed)
            raise failure(
                method, path, response.status_code, error_message(response), config_errors(response)
            )
        try:
            return msgspec.json.decode(response.content or b"null", type=result)
        except msgspec.DecodeError as exc:
            raise BadResponse(f"{method} {path}: unexpected response from floe: {exc}") from exc

    # -- pipeline -----------------------------------------------------------------------------------

    def pipeline(self) -> Pipeline | None:
        """The applied floe.yaml revision (None before the first `floe apply`)."""
        try:
            return self._call("GET", "/pipeline", Pipeline)
        except NotFound:
            return None

    def apply_pipeline(self, config: Mapping[str, Any], *, dry_run: bool = False) -> ApplyOutcome:
        """Validate and apply a floe.yaml document (as JSON): create and evolve its tables."""
        return self._call("PUT", "/pipeline", ApplyOutcome, body={"config": config, "dry_run": dry_run})

    # -- Kafka offsets ------------------------------------------------------------------------------

    def committed_offsets(self, warehouse: str, namespace: tuple[str, ...], table: str) -> list[TopicOffsets]:
        """The Kafka offsets a table has committed, per topic and partition."""
        params = {"warehouse": warehouse, "namespace": NAMESPACE_SEPARATOR.join(namespace), "table": table}
        try:
            return self._call("GET", "/kafka-offsets", wire.KafkaOffsetsResponse, params=params).topics
        except NotFound as exc:
            raise TableNotFound(f"Table {'.'.join(namespace)}.{table} does not exist in floe") from exc

    def snapshot_at(
        self,
        warehouse: str,
        namespace: tuple[str, ...],
        table: str,
        partition: int | None = None,
        offset: int | None = None,
        topic: str | None = None,
        *,
        timestamp_ms: int | None = None,
    ) -> SnapshotAt:
        """The first snapshot of the table whose data includes Kafka record (partition, offset), or with
        `timestamp_ms` the table as of that record time (the newest snapshot holding no later record);
        `NotFound` (with the server's reason) when none holds it yet or it has been expired."""
        params: dict[str, str | int] = {
            "warehouse": warehouse,
            "namespace": NAMESPACE_SEPARATOR.join(namespace),
            "table": table,
        }
        for name, value in (("partition", partition), ("offset", offset), ("timestamp", timestamp_ms)):
            if value is not None:
                params[name] = value
        if topic is not None:
            params["topic"] = topic
        return self._call("GET", "/snapshots/at", SnapshotAt, params=params)

    def next_offsets(
        self, warehouse: str, namespace: tuple[str, ...], table: str, topic: str
    ) -> dict[int, int]:
        """The next offset per partition of `topic` that the table has committed (empty: none yet)."""
        for entry in self.committed_offsets(warehouse, namespace, table):
            if entry.topic == topic:
                return {p.partition: p.next_offset for p in entry.partitions}
        return {}

    # -- completeness watermarks (docs/watermarks.md) ------------------------------------------------

    def watermark(
        self,
        warehouse: str,
        namespace: tuple[str, ...],
        table: str,
        until_ms: int | None = None,
        wait_seconds: float = 0,
    ) -> wire.WatermarkResponse:
        """The table's completeness watermark; with `until_ms` and `wait_seconds`, answered once it is
        complete through `until_ms` or after the wait (keep it below the client's timeout)."""
        params: dict[str, str | int | None] = {
            "warehouse": warehouse,
            "namespace": NAMESPACE_SEPARATOR.join(namespace),
            "table": table,
            "until": until_ms,
            "wait": f"{wait_seconds:g}" if wait_seconds and until_ms is not None else None,
        }
        try:
            return self._call("GET", "/watermark", wire.WatermarkResponse, params=params)
        except NotFound as exc:
            raise TableNotFound(f"Table {'.'.join(namespace)}.{table} does not exist in floe") from exc

    def report_end_offsets(
        self,
        warehouse: str,
        observed_at_ms: int,
        tables: Sequence[tuple[Sequence[str], str, str, Mapping[int, int]]],
    ) -> wire.EndOffsetsAccepted:
        """Report the broker end offsets read at `observed_at_ms` for each (namespace, table, topic,
        {partition: end offset}); the tables' completeness after it."""
        body = {
            "warehouse": warehouse,
            "observed-at-ms": observed_at_ms,
            "tables": [
                {
                    "namespace": list(namespace),
                    "table": name,
                    "topic": topic,
                    "end-offsets": {str(p): o for p, o in sorted(ends.items())},
                }
                for namespace, name, topic, ends in tables
            ],
        }
        return self._call("POST", "/watermark/observations", wire.EndOffsetsAccepted, body=body)

    # -- instance leases ---------------------------------------------------------------------------

    def renew_lease(self, group: str, member: str, ttl_seconds: float) -> wire.LeaseGroup:
        """Hold `member`'s lease in `group` for `ttl_seconds`; the group's live members."""
        path = f"/leases/{group}/{member}"
        return self._call("PUT", path, wire.LeaseGroup, body={"ttl-seconds": ttl_seconds})

    def end_lease(self, group: str, member: str) -> None:
        """End `member`'s lease now."""
        self._call("DELETE", f"/leases/{group}/{member}", type(None))

    # -- clusters, keys, audit ----------------------------------------------------------------------

    def create_cluster(self, name: str, warehouse: str | None = None) -> Cluster:
        return self._call("POST", "/clusters", Cluster, body={"name": name, "warehouse": warehouse})

    def clusters(self) -> list[Cluster]:
        return self._call("GET", "/clusters", wire.ListClustersResponse).clusters

    def delete_cluster(self, name: str) -> None:
        self._call("DELETE", f"/clusters/{name}", type(None))

    def create_key(
        self,
        role: str,
        *,
        cluster: str | None = None,
        description: str = "",
        expires_at: datetime | None = None,
        expires_in_seconds: int | None = None,
    ) -> IssuedKey:
        body: dict[str, Any] = {"cluster": cluster, "role": role, "description": description}
        if expires_at is not None:
            body["expires_at"] = expires_at
        if expires_in_seconds is not None:
            body["expires_in_seconds"] = expires_in_seconds
        return self._call("POST", "/keys", IssuedKey, body=body)

    def keys(self, cluster: str | None = None) -> list[ApiKey]:
        return self._call("GET", "/keys", wire.ListKeysResponse, params={"cluster": cluster}).keys

    def revoke_key(self, client_id: str) -> None:
        self._call("DELETE", f"/keys/{client_id}", type(None))

    def rotate_key(self, client_id: str) -> IssuedKey:
        return self._call("POST", f"/keys/{client_id}/rotate", IssuedKey)

    def audit(
        self,
        *,
        cluster: str | None = None,
        limit: int = 100,
        before: int | None = None,
        subject: str | None = None,
        action: str | None = None,
        target: str | None = None,
        outcome: str | None = None,
        since: str | None = None,
        until: str | None = None,
        hide_pipeline: bool = False,
    ) -> AuditPage:
        """Audit entries, newest first, narrowed as the console narrows them (None: no filter)."""
        params = {
            "cluster": cluster,
            "limit": limit,
            "before": before,
            "subject": subject,
            "action": action,
            "target": target,
            "outcome": outcome,
            "since": since,
            "until": until,
            "hide_pipeline": "true" if hide_pipeline else None,
        }
        return self._call("GET", "/audit", AuditPage, params=params)

    # -- maintenance passes -------------------------------------------------------------------------

    def record_pass(self, record: PassRecord) -> MaintenancePass:
        return self._call("POST", "/maintenance/passes", MaintenancePass, body=record)

    def passes(
        self,
        *,
        warehouse: str | None = None,
        namespace: tuple[str, ...] | None = None,
        table: str | None = None,
        limit: int | None = None,
    ) -> list[MaintenancePass]:
        """Recorded passes, newest first."""
        params = {
            "warehouse": warehouse,
            "namespace": None if namespace is None else NAMESPACE_SEPARATOR.join(namespace),
            "table": table,
            "limit": limit,
        }
        return self._call("GET", "/maintenance/passes", wire.ListPassesResponse, params=params).passes
