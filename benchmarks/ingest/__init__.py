"""Ingestion benchmark: `floe ingest` vs a plain Spark Structured Streaming Kafka → Iceberg job."""
