"""floe's Iceberg REST catalog: the HTTP API, the commit core, the store and the storage layer."""
