"""The HTTP layer: Litestar controllers over the catalog services."""
