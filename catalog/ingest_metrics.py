"""The ingestion service's Prometheus metrics as floe reads them back: per table (`namespace.table`),
its partitions' offset lag, time lag and committed offsets, records and bytes per second, dead letters,
last commit, completeness watermark and offset completeness, the error that stopped it and a source
topic that does not exist, if any. `floe status` prints them; the web console shows them beside each
table. Pure."""

from __future__ import annotations

from typing import Any


def ingest_status(text: str) -> dict[str, Any]:
    """`{"tables": [...]}` from the Prometheus text exposition of `floe ingest`'s metrics endpoint, one
    entry per table, sorted, each with its partitions sorted."""
    from prometheus_client.parser import text_string_to_metric_families

    tables: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            table = sample.labels.get("table")
            if table is None:
                continue
            entry = tables.setdefault(table, {"table": table, "partitions": {}})
            partition = sample.labels.get("partition")
            name = sample.name
            if partition is not None and partition != "all":
                part = entry["partitions"].setdefault(partition, {"partition": int(partition)})
                if name == "floe_ingest_partition_offset_lag":
                    part["offset_lag"] = int(sample.value)
                elif name == "floe_ingest_partition_time_lag_seconds":
                    part["time_lag_seconds"] = round(sample.value, 3)
                elif name == "floe_ingest_committed_offset":
                    part["committed_offset"] = int(sample.value)
            elif name == "floe_ingest_records_per_second":
                entry["records_per_second"] = round(sample.value, 1)
            elif name == "floe_ingest_bytes_per_second":
                entry["mib_per_second"] = round(sample.value / 2**20, 3)
            elif name == "floe_ingest_dead_letters_total":
                entry["dead_letters"] = int(sample.value)
            elif name == "floe_ingest_records_total":
                entry["records"] = int(sample.value)
            elif name == "floe_ingest_records_with_undeclared_fields_total":
                entry["records_with_undeclared_fields"] = int(sample.value)
            elif name == "floe_ingest_undeclared_field_records_total" and "field" in sample.labels:
                entry.setdefault("undeclared_fields", {})[sample.labels["field"]] = int(sample.value)
            elif name == "floe_ingest_watermark_timestamp_seconds":
                entry["watermark"] = sample.value
            elif name == "floe_ingest_offset_completeness":
                entry["offset_completeness"] = round(sample.value, 4)
            elif name == "floe_ingest_last_commit_timestamp_seconds":
                entry["last_commit"] = sample.value
            elif name == "floe_ingest_table_error" and sample.value:
                entry["error"] = sample.labels.get("error", "")
            elif name == "floe_ingest_topic_missing" and sample.value:
                entry["missing_topic"] = sample.labels.get("topic")
    for entry in tables.values():
        entry["partitions"] = sorted(entry["partitions"].values(), key=lambda p: p["partition"])
    return {"tables": sorted(tables.values(), key=lambda t: t["table"])}
