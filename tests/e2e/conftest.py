"""A real single-node Kafka broker for the whole test session (`kafka` fixture).

Registered through `pytest_plugins` in tests/conftest.py. The broker's data directory, config and
`server.log` live under pytest's basetemp, so a failing run can be inspected afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devtools.kafka_broker import LocalKafka


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A started LocalKafka; `kafka.bootstrap_servers` is `127.0.0.1:<port>`."""
    with LocalKafka(data_dir=tmp_path_factory.mktemp("kafka")) as broker:
        yield broker
