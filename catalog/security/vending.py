"""Storage credential vending: short-lived S3 credentials scoped to one table's location.

For a table in an S3 warehouse whose settings name an IAM role (`sts.role-arn`), floe calls STS
AssumeRole with a session policy that allows only the table's prefix — read-only for readers, read and
write for writers — and hands engines the temporary key, secret and session token with the endpoint,
region and addressing they need. Engines never see the warehouse's own keys.

The server's own identity for STS is the warehouse's `s3.access-key-id`/`s3.secret-access-key` when set,
else the standard AWS credential chain (environment, profile, instance role). Credentials are never
logged: `VendedCredential` keeps its config out of `repr`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from catalog.errors import BadRequest, Forbidden, ServiceUnavailable
from catalog.locations import is_within, normalize_location

log = logging.getLogger(__name__)

ROLE_ARN = "sts.role-arn"
STS_ENDPOINT = "sts.endpoint"
EXTERNAL_ID = "sts.external-id"
DURATION = "sts.duration-seconds"
DEFAULT_DURATION_SECONDS = 3600
# AssumeRole accepts 15 minutes to 12 hours (the role's own maximum may be lower).
MIN_DURATION_SECONDS, MAX_DURATION_SECONDS = 900, 43200
# A cached credential is handed out until this much of its lifetime is left (at most half of it).
REFRESH_MARGIN_SECONDS = 600
# Credentials cached per (table location, mode, warehouse settings); old entries are dropped first.
CACHE_ENTRIES = 4096
# The header value that asks for vended credentials (the spec also names `remote-signing`).
VENDED_CREDENTIALS = "vended-credentials"
# Characters IAM gives meaning to inside a policy's resources and conditions: a table location holding
# one could widen its own session policy, so such locations get no credentials.
_POLICY_WILDCARDS = ("*", "?", "$")


@dataclass(frozen=True, slots=True)
class VendedCredential:
    """Temporary storage credentials for every object under `prefix` (a spec `StorageCredential`; it
    ends with `/`)."""

    prefix: str
    config: dict[str, str] = field(repr=False)
    expires_at_ms: int


def wants_vended_credentials(access_delegation: str | None) -> bool:
    """Whether an `X-Iceberg-Access-Delegation` header asks for vended credentials (it is a
    comma-separated list of mechanisms)."""
    if not access_delegation:
        return False
    return VENDED_CREDENTIALS in (m.strip().lower() for m in access_delegation.split(","))


def can_vend(properties: Mapping[str, str], location: str) -> bool:
    """Whether a warehouse at `location` with these settings vends credentials at all."""
    return location.startswith(("s3://", "s3a://")) and bool(properties.get(ROLE_ARN))


def check_scope(location: str, allowed_prefix: str) -> str:
    """Refuse to vend for a table location outside `allowed_prefix` (the warehouse, or the caller's
    cluster folder in it): a table's location is chosen by whoever created it, and credentials for
    it must not reach other tables' files. Both are compared in canonical form (`..`, `s3a://`,
    duplicate slashes resolved, as everywhere in floe); returns the canonical location."""
    if any(c in location for c in _POLICY_WILDCARDS):
        raise Forbidden(f"Cannot vend storage credentials for {location}: the location contains * ? or $")
    try:
        canonical, allowed = normalize_location(location), normalize_location(allowed_prefix)
    except BadRequest as exc:
        raise Forbidden(f"Cannot vend storage credentials for {location}: {exc.message}") from None
    if not is_within(canonical, allowed):
        raise Forbidden(f"Cannot vend storage credentials for {canonical}: it is outside {allowed}")
    if not urlparse(canonical).path.strip("/"):
        raise Forbidden(f"Cannot vend storage credentials for {canonical}: it is a whole bucket")
    if canonical == allowed:
        # A table placed at its cluster's (or the warehouse's) own folder: credentials for it would
        # reach every other table in that folder.
        raise Forbidden(
            f"Cannot vend storage credentials for {canonical}: it is the whole folder {allowed}, not a "
            "table's folder below it"
        )
    return canonical


def session_policy(location: str, *, read_only: bool) -> dict[str, Any]:
    """An IAM policy allowing objects under `location` only (and listing of that prefix).

    Every prefix in it ends with `/`: `wh/a` as a list prefix would also list `wh/ab…` (another
    cluster's object names), and `wh/a*` would reach its objects."""
    parsed = urlparse(location)
    bucket, folder = parsed.netloc, parsed.path.strip("/")
    if not bucket or not folder:
        raise BadRequest(f"Cannot scope credentials to {location!r}: not an s3://bucket/prefix location")
    prefix = folder + "/"
    object_actions = ["s3:GetObject", "s3:GetObjectVersion"]
    if not read_only:
        object_actions += ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": object_actions, "Resource": [f"arn:aws:s3:::{bucket}/{prefix}*"]},
            {
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
                "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}},
            },
            {"Effect": "Allow", "Action": ["s3:GetBucketLocation"], "Resource": [f"arn:aws:s3:::{bucket}"]},
        ],
    }


def _duration(properties: Mapping[str, str]) -> int:
    raw = properties.get(DURATION) or str(DEFAULT_DURATION_SECONDS)
    try:
        seconds = int(raw)
    except ValueError:
        message = f"Warehouse setting {DURATION} is not a number of seconds: {raw!r}"
        raise ServiceUnavailable(message) from None
    return max(MIN_DURATION_SECONDS, min(MAX_DURATION_SECONDS, seconds))


class CredentialVendor:
    """Assumes the warehouse's role per table prefix, caching each credential until near its expiry.

    One per server process; thread-safe (`vend` runs in worker threads)."""

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple[Any, ...], VendedCredential] = OrderedDict()
        self._clients: dict[tuple[str | None, ...], Any] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(properties: Mapping[str, str], location: str, read_only: bool) -> tuple[Any, ...]:
        # Every warehouse setting is part of the key: a changed role, endpoint or region must not be
        # answered from the cache.
        return (location.rstrip("/"), read_only, tuple(sorted(properties.items())))

    def cached(
        self, properties: Mapping[str, str], location: str, *, read_only: bool
    ) -> VendedCredential | None:
        """The cached credential for `location` while it is fresh enough to hand out, else None
        (non-blocking: lets the caller skip the worker thread that `vend` needs)."""
        key = self._key(properties, location, read_only)
        with self._lock:
            credential = self._cache.get(key)
            if credential is None:
                return None
            self._cache.move_to_end(key)
        if credential.expires_at_ms - int(time.time() * 1000) > self._margin_ms(properties):
            return credential
        return None

    def vend(self, properties: Mapping[str, str], location: str, *, read_only: bool) -> VendedCredential:
        """Credentials for `location` (blocking: an STS call unless cached; run it in a worker thread)."""
        cached = self.cached(properties, location, read_only=read_only)
        if cached is not None:
            return cached
        location = location.rstrip("/")
        key = self._key(properties, location, read_only)
        credential = self._assume(properties, location, read_only=read_only)
        with self._lock:
            self._cache[key] = credential
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        log.info(
            "vended %s credentials for %s, valid until %d",
            "read-only" if read_only else "read-write",
            location,
            credential.expires_at_ms,
        )
        return credential

    @staticmethod
    def _margin_ms(properties: Mapping[str, str]) -> int:
        return min(REFRESH_MARGIN_SECONDS, _duration(properties) // 2) * 1000

    def _sts(self, properties: Mapping[str, str], region: str) -> Any:
        """An STS client per endpoint, region and server identity (clients are thread-safe, their
        creation is not, and it costs tens of milliseconds)."""
        # boto3 is imported on first use: only servers with an S3 warehouse that vends need it.
        import boto3
        from botocore.config import Config

        identity = (
            properties.get("s3.access-key-id"),
            properties.get("s3.secret-access-key"),
            properties.get("s3.session-token"),
        )
        key = (region, properties.get(STS_ENDPOINT) or None, *identity)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                session = boto3.session.Session(
                    aws_access_key_id=identity[0] or None,
                    aws_secret_access_key=identity[1] or None,
                    aws_session_token=identity[2] or None,
                )
                client = session.client(
                    "sts",
                    region_name=region,
                    endpoint_url=properties.get(STS_ENDPOINT) or None,
                    config=Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5),
                )
                self._clients[key] = client
        return client

    def _assume(self, properties: Mapping[str, str], location: str, *, read_only: bool) -> VendedCredential:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        region = (
            properties.get("s3.region")
            or properties.get("client.region")
            or boto3.session.Session().region_name
            or "us-east-1"
        )
        request: dict[str, Any] = {
            "RoleArn": properties[ROLE_ARN],
            "RoleSessionName": f"floe-{uuid.uuid4().hex[:16]}",
            "Policy": json.dumps(session_policy(location, read_only=read_only), separators=(",", ":")),
            "DurationSeconds": _duration(properties),
        }
        if properties.get(EXTERNAL_ID):
            request["ExternalId"] = properties[EXTERNAL_ID]
        try:
            answer = self._sts(properties, region).assume_role(**request)
        except (ClientError, BotoCoreError) as exc:
            # The message names the role and the failure, never a credential.
            log.warning("STS AssumeRole of %s for %s failed: %s", properties[ROLE_ARN], location, exc)
            raise ServiceUnavailable(
                f"Cannot vend storage credentials: STS AssumeRole failed: {exc}"
            ) from exc
        creds = answer["Credentials"]
        expires_ms = int(creds["Expiration"].timestamp() * 1000)
        config = {
            "s3.access-key-id": creds["AccessKeyId"],
            "s3.secret-access-key": creds["SecretAccessKey"],
            "s3.session-token": creds["SessionToken"],
            "s3.session-token-expires-at-ms": str(expires_ms),
            "s3.region": region,
            "client.region": region,
        }
        if properties.get("s3.endpoint"):
            config["s3.endpoint"] = properties["s3.endpoint"]
        if properties.get("s3.path-style-access"):
            config["s3.path-style-access"] = properties["s3.path-style-access"]
        # The prefix engines match file paths against ends with `/`: it names the table's folder only.
        return VendedCredential(prefix=location.rstrip("/") + "/", config=config, expires_at_ms=expires_ms)
