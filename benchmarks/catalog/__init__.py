"""Catalog benchmark: floe's REST catalog vs the Apache Iceberg reference REST server."""
