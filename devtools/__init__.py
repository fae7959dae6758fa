"""Development launchers: real local components for `floe dev …`, `floe up`, the tests and the benchmarks.

- `ports`: free loopback ports.
- `processes`: wait until a child process answers HTTP, stop it.
- `postgres`: a throwaway PostgreSQL (Debian's binaries, else the `pgserver` wheel's, imported lazily).
- `catalog_server`: a real `floe serve` subprocess.
- `kafka_broker`: a single-node Apache Kafka broker from pinned Maven Central jars.
- `schema_registry`: Apicurio Registry (Confluent-compatible API) built from pinned Maven Central jars.

The Maven pins and the embedded Java source are data files in `devtools/data/`. Production code
(catalog, ingest, maintenance, runtime) never imports this package; only the command line's
development commands (`floe dev …`, `floe up`), tests and benchmarks do (tests/unit/test_architecture.py).
"""
