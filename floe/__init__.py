"""floe's top-level package: the `floe` command line (`floe.cli`), the one place that wires the catalog,
ingestion, maintenance and the development components together. `catalog/` imports nothing from here."""
