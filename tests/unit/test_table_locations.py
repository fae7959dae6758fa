"""The location rules of new tables (`catalog.locations`): a namespace's folder, a table's default
location in it, and recognizing one floe assigned (a staged create sends it back)."""

from __future__ import annotations

from catalog.locations import default_table_location, is_default_table_location, namespace_location

WAREHOUSE = "s3://bucket/wh/"


def test_a_namespace_folder_is_its_location_property_or_its_path_in_the_warehouse() -> None:
    assert namespace_location(WAREHOUSE, ["sales", "eu"], {}) == "s3://bucket/wh/sales/eu"
    assert namespace_location(WAREHOUSE, ["sales"], {"location": "s3://bucket/elsewhere/"}) == (
        "s3://bucket/elsewhere"
    )


def test_a_default_table_location_is_recognized_and_others_are_not() -> None:
    folder = namespace_location(WAREHOUSE, ["sales"], {})
    first, second = default_table_location(folder, "orders"), default_table_location(folder, "orders")
    assert first.startswith("s3://bucket/wh/sales/orders-")
    assert first != second, "a re-created table gets a folder of its own"
    assert is_default_table_location(folder, "orders", first)
    assert not is_default_table_location(folder, "other", first)
    assert not is_default_table_location(folder, "orders", "s3://bucket/wh/sales/orders")
    assert not is_default_table_location(folder, "orders", "gs://bucket/wh/sales/orders-0123456789ab")
