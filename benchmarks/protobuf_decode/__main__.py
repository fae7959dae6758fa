"""`python -m benchmarks.protobuf_decode`: protobuf decode paths next to JSON and Avro, same records."""

from benchmarks.protobuf_decode.run import main

raise SystemExit(main())
