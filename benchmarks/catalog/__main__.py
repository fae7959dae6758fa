"""`python -m benchmarks.catalog`: floe vs the Apache Iceberg reference REST server, side by side."""

from benchmarks.catalog.run import main

raise SystemExit(main())
