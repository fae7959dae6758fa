"""Storage credential vending: short-lived S3 credentials scoped to one table's location.

For a table in an S3 warehouse whose settings name an IAM role (`sts.role-arn`), floe calls STS
AssumeRole with a session policy that allows only the table's prefix — read-only for readers, read and
write for writers — and hands engines the temporary key, secret and session token with the endpoint,
region and addressing they need. Engines never see the warehouse's own keys.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from catalog.errors import BadRequest, ServiceUnavailable

ROLE_ARN = "sts.role-arn"
STS_ENDPOINT = "sts.endpoint"
EXTERNAL_ID = "sts.external-id"
DURATION = "sts.duration-seconds"
DEFAULT_DURATION_SECONDS = 3600
# A cached credential is handed out until this much of its lifetime is left.
REFRESH_MARGIN_SECONDS = 600


@dataclass(frozen=True, slots=True)
class VendedCredential:
    prefix: str
    config: dict[str, str]
    expires_at_ms: int


def can_vend(properties: Mapping[str, str], location: str) -> bool:
    return location.startswith(("s3://", "s3a://")) and bool(properties.get(ROLE_ARN))


def session_policy(location: str, *, read_only: bool) -> dict[str, Any]:
    """An IAM policy allowing objects under `location` only (and listing of that prefix)."""
    parsed = urlparse(location)
    bucket, prefix = parsed.netloc, parsed.path.lstrip("/").rstrip("/")
    if not bucket or not prefix:
        raise BadRequest(f"Cannot scope credentials to {location!r}: not an s3://bucket/prefix location")
    object_actions = ["s3:GetObject", "s3:GetObjectVersion"]
    if not read_only:
        object_actions += ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": object_actions, "Resource": [f"arn:aws:s3:::{bucket}/{prefix}/*"]},
            {
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
                "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}},
            },
            {"Effect": "Allow", "Action": ["s3:GetBucketLocation"], "Resource": [f"arn:aws:s3:::{bucket}"]},
        ],
    }


class CredentialVendor:
    """Assumes the warehouse's role per table prefix, caching each credential until near its expiry."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, bool], VendedCredential] = {}
        self._lock = threading.Lock()

    def vend(self, properties: Mapping[str, str], location: str, *, read_only: bool) -> VendedCredential:
        """Blocking (STS call): run it in a worker thread."""
        location = location.rstrip("/")
        key = (properties.get(ROLE_ARN, ""), location, read_only)
        now_ms = int(time.time() * 1000)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached.expires_at_ms - now_ms > REFRESH_MARGIN_SECONDS * 1000:
            return cached
        credential = self._assume(properties, location, read_only=read_only)
        with self._lock:
            self._cache[key] = credential
        return credential

    @staticmethod
    def _assume(properties: Mapping[str, str], location: str, *, read_only: bool) -> VendedCredential:
        region = properties.get("s3.region") or properties.get("client.region") or "us-east-1"
        sts = boto3.client(
            "sts",
            region_name=region,
            endpoint_url=properties.get(STS_ENDPOINT) or None,
            config=Config(retries={"max_attempts": 3, "mode": "standard"}),
        )
        request: dict[str, Any] = {
            "RoleArn": properties[ROLE_ARN],
            "RoleSessionName": f"floe-{uuid.uuid4().hex[:16]}",
            "Policy": json.dumps(session_policy(location, read_only=read_only)),
            "DurationSeconds": int(properties.get(DURATION, DEFAULT_DURATION_SECONDS)),
        }
        if properties.get(EXTERNAL_ID):
            request["ExternalId"] = properties[EXTERNAL_ID]
        try:
            answer = sts.assume_role(**request)
        except (ClientError, BotoCoreError) as exc:
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
        return VendedCredential(prefix=location, config=config, expires_at_ms=expires_ms)
