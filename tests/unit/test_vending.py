"""Storage credential vending, the pure pieces (catalog/security/vending.py): the session policy's shape
and the scope check that refuses locations outside a cluster's folder. Vending through the API (moto's
S3, STS and IAM) is in tests/api/test_vending.py."""

from __future__ import annotations

import pytest

from catalog.errors import Forbidden
from catalog.security.vending import check_scope, session_policy

WRITE_ACTIONS = {"s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"}


def test_session_policy_shape() -> None:
    location = "s3://bucket/wh/kafka_a/clicks-1"
    reader = session_policy(location + "/", read_only=True)
    assert reader == session_policy(location, read_only=True)
    actions = {a for s in reader["Statement"] for a in s["Action"]}
    assert actions == {"s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "s3:GetBucketLocation"}
    writer = session_policy(location, read_only=False)
    assert {a for s in writer["Statement"] for a in s["Action"]} == actions | WRITE_ACTIONS


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("s3://lake/wh/kafka_b/t", "outside"),
        ("s3://lake/wh/kafka_ab/t", "outside"),
        ("s3://lake/wh/kafka_a-x/t", "outside"),
        ("s3://lake/wh/kafka_a*", r"\* \? or \$"),
        ("s3://lake/wh/kafka_a/t*", r"\* \? or \$"),
        ("s3://lake/wh/kafka_a/${aws:username}", r"\* \? or \$"),
        ("s3://other/wh/kafka_a/t", "outside"),
        ("s3://lake/wh/kafka_a/../kafka_b/t", "outside"),
        ("s3a://lake/wh/kafka_a/../kafka_b/t", "outside"),
        ("s3://lake/wh/kafka_a/%2e%2e/kafka_b/t", "percent-escapes"),
    ],
)
def test_scope_refuses_locations_outside_the_cluster_folder(location: str, reason: str) -> None:
    check_scope("s3://lake/wh/kafka_a/t", "s3://lake/wh/kafka_a")
    check_scope("s3://lake/wh/kafka_a/ns/t-1/", "s3://lake/wh/kafka_a/")
    with pytest.raises(Forbidden, match=reason):
        check_scope(location, "s3://lake/wh/kafka_a")
    with pytest.raises(Forbidden, match="whole bucket"):
        check_scope("s3://lake", "s3://lake")
