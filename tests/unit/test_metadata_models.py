"""`MetadataModels`: committed models kept by location, bounded by their estimated size in memory."""

from __future__ import annotations

from typing import cast

from pyiceberg.table.metadata import TableMetadata

from catalog.service.metadata_models import MODEL_BYTES_PER_JSON_BYTE, MetadataModels


def _model(n: int) -> TableMetadata:
    return cast(TableMetadata, object())  # identity is all the cache looks at


def test_a_thousand_small_tables_all_stay() -> None:
    """Ingestion commits a thousand tables in turn: every one of their models is found next round (a
    count limit of 128 missed on every commit there)."""
    models = MetadataModels()
    kept = {f"s3://w/t{i}/metadata/00001.metadata.json": _model(i) for i in range(2000)}
    for location, model in kept.items():
        models.put(location, model, 13_000)
    assert len(models) == 2000
    assert all(models.get(location) is model for location, model in kept.items())


def test_the_least_recently_used_go_first_when_the_bytes_run_out() -> None:
    per_model = 1000 * MODEL_BYTES_PER_JSON_BYTE
    models = MetadataModels(capacity_bytes=3 * per_model)
    first, second, third, fourth = (_model(i) for i in range(4))
    models.put("a", first, 1000)
    models.put("b", second, 1000)
    models.put("c", third, 1000)
    assert models.get("a") is first  # used: "b" is now the least recently used
    models.put("d", fourth, 1000)
    assert models.get("b") is None
    assert [models.get(k) for k in "acd"] == [first, third, fourth]
    assert models.size_bytes == 3 * per_model


def test_a_model_larger_than_the_whole_budget_is_not_kept() -> None:
    models = MetadataModels(capacity_bytes=10 * MODEL_BYTES_PER_JSON_BYTE)
    models.put("small", _model(1), 5)
    models.put("huge", _model(2), 11)
    assert models.get("huge") is None
    assert models.get("small") is not None
    assert models.get(None) is None


def test_a_new_version_drops_the_one_it_replaced() -> None:
    models = MetadataModels()
    old, new = _model(1), _model(2)
    models.put("t/v1.json", old, 1000)
    models.put("t/v2.json", new, 1200, replaces="t/v1.json")
    assert models.get("t/v1.json") is None
    assert models.get("t/v2.json") is new
    assert models.size_bytes == 1200 * MODEL_BYTES_PER_JSON_BYTE


def test_tables_committed_in_turn_all_hit_at_a_budget_of_one_version_each() -> None:
    """Ingestion's round: read a table's model (get), commit, keep the new one (put). Each table's old
    version had just been read, so it was as recent as the new one: without `replaces` the cache held
    two versions of every table and missed on every commit at a budget of one version each."""
    tables, per_model = 100, 1000
    budget = (tables + 1) * per_model * MODEL_BYTES_PER_JSON_BYTE

    def hits(replacing: bool) -> int:
        models = MetadataModels(capacity_bytes=budget)
        for t in range(tables):
            models.put(f"t{t}/v0", _model(t), per_model)
        found = 0
        for version in range(1, 4):
            for t in range(tables):
                base = f"t{t}/v{version - 1}"
                found += models.get(base) is not None
                new = f"t{t}/v{version}"
                models.put(new, _model(t), per_model, replaces=base if replacing else None)
        return found

    assert hits(replacing=True) == 3 * tables
    assert hits(replacing=False) < tables  # the design before: a cyclic scan of twice the budget
