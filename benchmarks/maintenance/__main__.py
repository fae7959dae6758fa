"""`python -m benchmarks.maintenance`: DuckDB on small files vs the same table after maintenance."""

from benchmarks.maintenance.run import main

raise SystemExit(main())
