"""The protobuf decode-path benchmark: `python -m benchmarks.protobuf_decode`."""
