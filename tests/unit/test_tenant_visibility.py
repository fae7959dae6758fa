"""The pure pieces of issue 29 items 5, 6 and 7: offsets properties bounded and ranged before they are
trusted, URL credentials removed from stored configurations, a table never at a cluster's or namespace's
folder. The attacks through a server are in tests/api/test_tenant_visibility.py."""

from __future__ import annotations

import json

import pytest

from catalog.errors import BadRequest
from catalog.kafka_offsets import MAX_OFFSETS_CHARS, InvalidOffsets, parse_offsets
from catalog.locations import confine_table_location
from catalog.pipelines.sources import strip_userinfo
from catalog.storage import client_properties


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps({"0": 2**63}),
        json.dumps({"0": -1}),
        json.dumps({str(2**31): 0}),
        json.dumps({"-1": 0}),
        json.dumps({" 1": 0}),
        json.dumps({"0": 1.0}),
        json.dumps({"0": True}),
        '{"0": ' + "9" * 5000 + "}",
        '{"0": {"1": 2}}',
        '{"0": [1]}',
        "[" * 200_000,
        "{" + " " * MAX_OFFSETS_CHARS + "}",
        "null",
    ],
)
def test_offsets_outside_kafkas_ranges_or_not_flat_are_refused(raw: str) -> None:
    with pytest.raises(InvalidOffsets):
        parse_offsets(raw)


def test_offsets_within_range_and_shown_leniently() -> None:
    assert parse_offsets(json.dumps({"0": 0, str(2**31 - 1): 2**63 - 1})) == {0: 0, 2**31 - 1: 2**63 - 1}
    assert parse_offsets('{"0": 5, "1": "junk", "2": 99999999999999999999}', skip_invalid=True) == {0: 5}
    with pytest.raises(InvalidOffsets):  # not flat: nothing is shown rather than parsed
        parse_offsets('{"0": 5, "1": {"x": 1}}', skip_invalid=True)


def test_stored_configurations_lose_url_credentials_only() -> None:
    stored = {
        "schema_registry": {"url": "https://me:p%40ss@registry:8081/x", "basic_auth_username_env": "U"},
        "destination_bucket_url": "s3://b?endpoint=http://k:s@minio:9000&region=r",
        "tables": [{"schema_registry_url": "http://me:a@b@registry"}, {"note": "mail me@example.com"}],
        "n": 3,
    }
    assert strip_userinfo(stored) == {
        "schema_registry": {"url": "https://registry:8081/x", "basic_auth_username_env": "U"},
        "destination_bucket_url": "s3://b?endpoint=http://minio:9000&region=r",
        "tables": [{"schema_registry_url": "http://registry"}, {"note": "mail me@example.com"}],
        "n": 3,
    }


@pytest.mark.parametrize(
    "location",
    ["s3://lake/wh/a", "s3://lake/wh/a/", "s3a://lake/wh//a/t/..", "s3://lake/wh/a/ns", "s3://lake/wh/a/ns/"],
)
def test_a_table_is_never_at_its_cluster_or_namespace_folder(location: str) -> None:
    with pytest.raises(BadRequest, match="folder of its own"):
        confine_table_location(location, "s3://lake/wh/a", "s3://lake/wh/a/ns")
    assert confine_table_location("s3://lake/wh/a/ns/t-1", "s3://lake/wh/a", "s3://lake/wh/a/ns")
    # A namespace location stored before floe checked them guards nothing but breaks nothing either.
    assert confine_table_location("s3://lake/wh/a/t", "s3://lake/wh/a", "relative/path")


def test_engines_never_get_an_endpoint_with_credentials() -> None:
    """A warehouse made from an older floe.yaml's bucket URL (`endpoint=http://key:secret@minio`)."""
    properties = {"s3.endpoint": "http://key:secret@minio:9000", "s3.region": "r"}
    assert client_properties(properties)["s3.endpoint"] == "http://minio:9000"
