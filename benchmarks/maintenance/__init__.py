"""DuckDB query time on a table of many small files vs the same table after `floe maintain`."""
