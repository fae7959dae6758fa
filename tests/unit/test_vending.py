"""Storage credential vending, the pure pieces (catalog/security/vending.py): the session policy's shape
and the scope check that refuses locations outside a cluster's folder. Vending through the API (moto's
S3, STS and IAM) is in tests/api/test_vending.py."""

from __future__ import annotations

import fnmatch

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


def _iam_like(pattern: str, value: str) -> bool:
    """IAM's StringLike: `*` any run of characters, `?` one (no other wildcards in floe's policies)."""
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


@pytest.mark.parametrize("location", ["s3://lake/wh/kafka_a/t-1", "s3://lake/wh/kafka_a/t-1/"])
def test_every_policy_prefix_is_a_folder_never_a_sibling(location: str) -> None:
    """`wh/kafka_a/t-1` as a prefix would list (and, as `…t-1*`, read) `wh/kafka_a/t-10…`."""
    for read_only in (True, False):
        objects, listing, _ = session_policy(location, read_only=read_only)["Statement"]
        assert objects["Resource"] == ["arn:aws:s3:::lake/wh/kafka_a/t-1/*"]
        prefixes = listing["Condition"]["StringLike"]["s3:prefix"]
        assert prefixes == ["wh/kafka_a/t-1/", "wh/kafka_a/t-1/*"]
        for sibling in ("wh/kafka_a/t-1", "wh/kafka_a/t-10", "wh/kafka_a/t-1x/y", "wh/kafka_a/t-1-old/"):
            assert not any(_iam_like(p, sibling) for p in prefixes), sibling
            assert not _iam_like(objects["Resource"][0], f"arn:aws:s3:::lake/{sibling}")
        for own in ("wh/kafka_a/t-1/", "wh/kafka_a/t-1/data/", "wh/kafka_a/t-1/metadata/v1.json"):
            assert any(_iam_like(p, own) for p in prefixes), own
        assert _iam_like(objects["Resource"][0], "arn:aws:s3:::lake/wh/kafka_a/t-1/data/f.parquet")


@pytest.mark.parametrize(
    "location", ["s3://lake/wh/kafka_a", "s3://lake/wh/kafka_a/", "s3a://lake/wh//kafka_a/x/.."]
)
def test_no_credentials_for_a_table_at_the_whole_cluster_folder(location: str) -> None:
    with pytest.raises(Forbidden, match="whole folder"):
        check_scope(location, "s3://lake/wh/kafka_a")
    with pytest.raises(Forbidden, match="whole folder"):
        check_scope("s3://lake/wh", "s3://lake/wh/")  # a global admin's table at the warehouse root
