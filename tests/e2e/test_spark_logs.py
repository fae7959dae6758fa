"""`ingest.spark_logs.quiet_expected_failure` in a local Spark session with two task slots: a job that fails
as a one-pass append stopped at a dead letter does, while the job's other task is still at work.

The other task must not be interrupted: interrupted in its abort, Iceberg's cleanup of the files it wrote
stops half way and logs "Failed to bulk delete" with an InterruptedException (seen in CI). A streaming
query turns interruption on for its batches, so the tests do too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import nullcontext
from typing import TYPE_CHECKING

import pytest

from ingest.spark_logs import INTERRUPT_ON_CANCEL, quiet_expected_failure
from tests.e2e.local_spark import spark_without_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.e2e

MESSAGE = "floe test: stopped at a dead letter"
FINISHED = "floe.test.sibling_task"  # a JVM system property the other task sets when its work is done
# Task 0 fails after 0.5 s; task 1 (the other) works for 3 s, then says it finished.
JOB = f"""
SELECT CASE WHEN id = 0
  THEN raise_error(concat(reflect('java.lang.Thread', 'sleep', 500L), '{MESSAGE}'))
  ELSE concat(reflect('java.lang.Thread', 'sleep', 3000L),
              reflect('java.lang.System', 'setProperty', '{FINISHED}', 'yes'))
END FROM range(0, 2, 1, 2)
"""


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with spark_without_tables("floe-spark-logs-tests", master="local[2]") as session:
        yield session


def _other_task_finished(spark: SparkSession) -> bool:
    """Whether the job's other task finished its work (waiting for it, at most 10 s)."""
    system = spark._jvm.java.lang.System  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if system.getProperty(FINISHED) == "yes":
            return True
        time.sleep(0.2)
    return False


def _run_failing_job(spark: SparkSession, quiet: bool) -> None:
    spark._jvm.java.lang.System.clearProperty(FINISHED)  # type: ignore[union-attr]
    around = quiet_expected_failure(spark, MESSAGE) if quiet else nullcontext()
    with around, pytest.raises(Exception, match=MESSAGE):
        spark.sql(JOB).collect()


@pytest.fixture
def streaming_batch(spark: SparkSession) -> Iterator[None]:
    """This thread's jobs are interrupted on cancel, as a streaming query's batches are."""
    spark.sparkContext.setLocalProperty(INTERRUPT_ON_CANCEL, "true")
    yield
    spark.sparkContext.setLocalProperty(INTERRUPT_ON_CANCEL, None)  # type: ignore[arg-type]  # None: unset


@pytest.mark.usefixtures("streaming_batch")
def test_the_failed_jobs_other_task_ends_uninterrupted(spark: SparkSession) -> None:
    _run_failing_job(spark, quiet=True)
    assert _other_task_finished(spark)
    # The thread's own setting is back once the write is over.
    assert spark.sparkContext.getLocalProperty(INTERRUPT_ON_CANCEL) == "true"


@pytest.mark.usefixtures("streaming_batch")
def test_without_it_the_other_task_is_interrupted(spark: SparkSession) -> None:
    """The control: the job above, outside `quiet_expected_failure`, has its other task interrupted."""
    _run_failing_job(spark, quiet=False)
    assert not _other_task_finished(spark)
