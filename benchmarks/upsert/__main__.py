"""`python -m benchmarks.upsert`: floe's upsert ingestion vs a plain foreachBatch MERGE job."""

from benchmarks.upsert.run import main

raise SystemExit(main())
