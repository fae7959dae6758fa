"""What the ingestion service and the maintenance worker both run on, owned by neither.

- `artifacts`: pinned Maven Central jars, downloaded once, SHA-1-verified, cached per user.
- `java`: finding a Java runtime for the JVM components.
- `spark`: the pinned Spark connector jars and a SparkSession whose Iceberg catalog is floe.

Depends on no other floe package (checked by tests/unit/test_architecture.py).
"""
