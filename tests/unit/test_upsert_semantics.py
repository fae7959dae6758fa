"""The upsert semantics in plain Python (what the Spark merge implements; the e2e tests hold it to
them) and the MERGE statement a batch runs."""

from __future__ import annotations

from ingest.upsert import Change, apply_batch, latest_per_key, merge_statement


def test_highest_offset_per_key_wins_within_a_batch() -> None:
    changes = [
        Change(0, 10, (1,), {"v": "a"}),
        Change(0, 12, (1,), {"v": "c"}),
        Change(0, 11, (1,), {"v": "b"}),
        Change(1, 3, (2,), {"v": "x"}),
    ]
    latest = latest_per_key(changes)
    assert latest[(1,)].row == {"v": "c"}
    assert latest[(2,)].offset == 3


def test_partition_breaks_a_tie_between_partitions() -> None:
    latest = latest_per_key([Change(2, 5, ("k",), {"v": 2}), Change(0, 5, ("k",), {"v": 0})])
    assert latest[("k",)].partition == 2


def test_insert_update_delete_of_one_key_in_one_batch_leaves_nothing() -> None:
    batch = [Change(0, 0, (1,), {"v": 1}), Change(0, 1, (1,), {"v": 2}), Change(0, 2, (1,), None)]
    assert apply_batch({}, batch) == {}


def test_delete_then_reinsert_in_one_batch_keeps_the_row() -> None:
    state = {(1,): {"v": 0}}
    batch = [Change(0, 0, (1,), None), Change(0, 1, (1,), {"v": 1})]
    assert apply_batch(state, batch) == {(1,): {"v": 1}}


def test_delete_of_a_key_never_seen_changes_nothing() -> None:
    state = {(1,): {"v": 0}}
    assert apply_batch(state, [Change(0, 7, (9,), None)]) == state


def test_later_batches_win() -> None:
    state = apply_batch({}, [Change(0, 0, ("a", 1), {"v": 1}), Change(0, 1, ("b", 1), {"v": 1})])
    state = apply_batch(state, [Change(0, 2, ("a", 1), {"v": 2}), Change(0, 3, ("b", 1), None)])
    assert state == {("a", 1): {"v": 2}}


def test_merge_statement_quotes_every_name() -> None:
    sql = merge_statement("floe.`ns`.`t`", "`src`", ["id", "we`ird"], ["id", "we`ird", "_kafka"])
    assert sql == (
        "MERGE INTO floe.`ns`.`t` t USING `src` s ON t.`id` = s.`id` AND t.`we``ird` = s.`we``ird` "
        "WHEN MATCHED AND s.`_floe_delete` THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.`id` = s.`id`, t.`we``ird` = s.`we``ird`, t.`_kafka` = s.`_kafka` "
        "WHEN NOT MATCHED AND NOT s.`_floe_delete` THEN INSERT (`id`, `we``ird`, `_kafka`) "
        "VALUES (s.`id`, s.`we``ird`, s.`_kafka`)"
    )


def test_where_an_avro_record_key_holds_the_key_fields() -> None:
    import json

    from pyiceberg.types import LongType, NestedField, StringType

    from ingest.upsert import avro_key_places

    tenant = NestedField(1, "tenant", StringType(), required=True)
    user = NestedField(2, "user_id", LongType(), required=True)
    record = {
        "type": "record",
        "name": "Key",
        "fields": [{"name": "user_id", "type": "long"}, {"name": "tenant", "type": "string"}],
    }
    assert avro_key_places(json.dumps(record), [tenant, user]) == ["tenant", "user_id"]
    partial = {**record, "fields": record["fields"][:1]}
    assert avro_key_places(json.dumps(partial), [tenant, user]) == [None, "user_id"]
    # A primitive key holds a single key field, never two.
    assert avro_key_places('"long"', [user]) == [""]
    assert avro_key_places('"long"', [tenant, user]) is None
    assert avro_key_places("not json", [user]) is None


def test_only_a_validation_failure_counts_as_a_lost_race() -> None:
    from ingest.upsert import lost_a_race

    refused = RuntimeError(
        "org.apache.iceberg.exceptions.ValidationException: Cannot commit, missing data files: [...]"
    )
    assert lost_a_race(refused)
    # floe refusing the batch's Kafka offsets, or a commit of unknown outcome: never merged again.
    fenced = RuntimeError("org.apache.iceberg.exceptions.CommitFailedException: Kafka offsets conflict: …")
    assert not lost_a_race(fenced)
    assert not lost_a_race(RuntimeError("org.apache.iceberg.exceptions.CommitStateUnknownException: …"))
