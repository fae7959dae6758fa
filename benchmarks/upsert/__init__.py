"""Upsert ingestion benchmark: floe's upsert tables vs a plain Spark `foreachBatch` MERGE job."""
