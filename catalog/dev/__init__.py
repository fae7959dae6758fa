"""Local components for development, tests and benchmarks: PostgreSQL, a catalog server process."""
