"""`python -m benchmarks.ingest`: floe's ingestion vs a plain Spark Structured Streaming job, side by side."""

from benchmarks.ingest.run import main

raise SystemExit(main())
