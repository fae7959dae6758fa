"""Storage credential vending without a server of its own: a local warehouse vends nothing (the session
server), and the vendor itself caches per table, mode and settings until near expiry (against moto's STS).
Vending through real `floe serve` processes with moto's S3, STS and IAM is in tests/e2e/test_vending.py.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import httpx
import pytest

from catalog.errors import ServiceUnavailable
from catalog.security.vending import CredentialVendor
from tests.e2e.test_vending import DELEGATION, REGION, Aws, _assert_no_secrets, _create_body, moto_aws


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    yield from moto_aws()


def test_local_warehouse_vends_nothing(http: httpx.Client, namespace: str) -> None:
    tables = f"/v1/default/namespaces/{namespace}/tables"
    created = http.post(tables, json=_create_body("local"), headers=DELEGATION)
    assert created.status_code == 200, created.text
    assert created.json()["metadata"]["location"].startswith("file://")
    _assert_no_secrets(created.json())
    loaded = http.get(f"{tables}/local", headers=DELEGATION)
    assert loaded.status_code == 200
    _assert_no_secrets(loaded.json())
    assert http.get(f"{tables}/local/credentials").json() == {"storage-credentials": []}


def test_vendor_caches_per_table_mode_and_settings_until_near_expiry(aws: Aws) -> None:
    vendor = CredentialVendor()
    # The server identity can also come from the warehouse's own keys instead of the AWS chain.
    properties = {
        "s3.access-key-id": aws.server_keys["aws_access_key_id"],
        "s3.secret-access-key": aws.server_keys["aws_secret_access_key"],
        "s3.region": REGION,
        "sts.role-arn": aws.role_arn,
        "sts.endpoint": aws.endpoint,
    }
    location = f"s3://{aws.bucket}/wh/kafka_a/t-1"
    first = vendor.vend(properties, location, read_only=True)
    assert "config" not in repr(first)
    assert first.config["s3.secret-access-key"] not in repr(first)
    assert vendor.vend(properties, location + "/", read_only=True) is first
    assert vendor.cached(properties, location, read_only=True) is first
    assert vendor.vend(properties, location, read_only=False).config != first.config
    assert vendor.vend(properties, f"{location}-other", read_only=True).config != first.config
    lifetime_s = (first.expires_at_ms / 1000) - time.time()
    assert 3500 < lifetime_s <= 3600

    # A changed warehouse setting is a different credential; the duration reaches STS (clamped).
    shorter = vendor.vend({**properties, "sts.duration-seconds": "60"}, location, read_only=True)
    assert shorter.config != first.config
    assert 800 < (shorter.expires_at_ms / 1000) - time.time() <= 900

    # Near its expiry a cached credential is replaced by a fresh one.
    key = next(k for k, v in vendor._cache.items() if v is first)
    vendor._cache[key] = dataclasses.replace(first, expires_at_ms=int(time.time() * 1000) + 60_000)
    assert vendor.cached(properties, location, read_only=True) is None
    renewed = vendor.vend(properties, location, read_only=True)
    assert renewed.config["s3.access-key-id"] != first.config["s3.access-key-id"]

    with pytest.raises(ServiceUnavailable, match=r"sts\.duration-seconds"):
        vendor.vend({**properties, "sts.duration-seconds": "soon"}, location, read_only=True)
    with pytest.raises(ServiceUnavailable, match="AssumeRole"):
        vendor.vend({**properties, "sts.role-arn": aws.role_arn + "-missing"}, location, read_only=True)
