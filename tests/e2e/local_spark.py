"""A local Spark session for tests that run floe's Spark expressions and JVM code on DataFrames only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def spark_without_tables(app_name: str, master: str = "local[1]") -> Iterator[SparkSession]:
    """floe's session (its jars and settings) on `master`, stopped at the end; its catalog is never used."""
    from runtime.spark import CatalogConnection, spark_session

    session = spark_session(
        app_name,
        # Never used: nothing here reads or writes a table.
        CatalogConnection("http://127.0.0.1:9", "default", "unused", "unused"),
        master=master,
        conf={"spark.driver.memory": "1g", "spark.ui.showConsoleProgress": "false"},
    )
    try:
        yield session
    finally:
        session.stop()
