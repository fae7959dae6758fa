"""Keeping an expected Spark job failure out of the log: the one-pass append stopped at a dead letter.

A one-pass batch (`ingest.batches`) stops its append with an error at its first dead letter and is then
written in two passes: a healthy run with a bad record. Spark logs such a stop as a task failure (ERROR
lines and stack traces from the executor, the scheduler and the write), which alarms operators. Within
`quiet_expected_failure`, exactly those loggers drop what they log for it (log4j2 filters, added once
per JVM):

- in the job's task threads (Spark puts a job's `mdc.*` local properties into its tasks' log context)
  and in the thread that runs the write, the executor's, the write's and `Utils`' lines;
- in the scheduler's threads, where nothing marks the job, the lines that quote the error's message,
  and `TaskSetManager`'s "failed N times; aborting job" while an expected failure is under way.

The job's other tasks are not interrupted when it fails (Spark's job property `spark.job.interruptOnCancel`,
which a streaming query turns on for its batches, is off within): they end at their next record and abort,
deleting the files they wrote. Interrupted, that deletion stops half way, leaving files behind and
logging Iceberg's "Failed to bulk delete" with an InterruptedException.

A local master's executors run in the driver's JVM, so that is all of it; a cluster's executors log as
their cluster does. Any other failure still logs as usual (the scheduler's "Lost task" line with its
stack trace, and floe's own error when the batch fails).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

# The job property that has a failed job's other tasks interrupted (on in a streaming query's batches).
INTERRUPT_ON_CANCEL = "spark.job.interruptOnCancel"
# The log context entry that marks the expected failure's threads (`mdc.` makes Spark copy it to tasks).
CONTEXT_KEY = "mdc.floe.expected_failure"
# Loggers that log the failure in the task's thread or the write's.
_TASK_LOGGERS = (
    "org.apache.spark.util.Utils",  # "Aborting task" with the stack trace
    "org.apache.spark.executor.Executor",  # "Exception in task" with the stack trace
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",  # "Aborting commit for partition"
    "org.apache.spark.sql.execution.datasources.v2.AppendDataExec",  # "… is aborting", "… aborted"
    "org.apache.iceberg.spark.source.SparkWrite",  # "Skipping cleanup of written files"
)
# Loggers that log it in the scheduler's threads: "Lost task … <the error>", "Job … failed: <the error>".
_SCHEDULER_LOGGERS = ("org.apache.spark.scheduler.TaskSetManager", "org.apache.spark.scheduler.DAGScheduler")
_ABORTING_JOB = r"Task \d+ in stage \S+ failed \d+ times; aborting job"

_lock = threading.Lock()
_installed: set[str] = set()  # messages whose filters this JVM has (one driver JVM per process)
_under_way = 0  # expected failures under way (each table's query runs its batches in its own thread)
_aborting_job_filter: Any = None
_unchangeable: list[str] = []  # why this JVM's logging could not be changed (then it is not tried again)


def _logger_config(jvm: Any, config: Any, name: str) -> Any:
    """`name`'s own LoggerConfig (added, inheriting its level and appenders, when it has none)."""
    existing = config.getLoggers().get(name)
    if existing is not None:
        return existing
    core = jvm.org.apache.logging.log4j.core
    logger = core.config.LoggerConfig.newBuilder().withLoggerName(name).withConfig(config).build()
    config.addLogger(name, logger)
    return logger


def _install(spark: Any, message: str) -> None:
    """Add the filters for `message`'s failure to this JVM's log configuration (once)."""
    jvm = spark._jvm
    core = jvm.org.apache.logging.log4j.core
    deny, neutral = core.Filter.Result.DENY, core.Filter.Result.NEUTRAL
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    pairs = spark.sparkContext._gateway.new_array(core.util.KeyValuePair, 1)
    pairs[0] = core.util.KeyValuePair(CONTEXT_KEY, message)
    in_context = core.filter.ThreadContextMapFilter.createFilter(pairs, "and", deny, neutral)
    quoting = core.filter.RegexFilter.createFilter(f"(?s).*\\Q{message}\\E.*", None, False, deny, neutral)
    for name in _TASK_LOGGERS:
        _logger_config(jvm, config, name).addFilter(in_context)
    for name in (*_TASK_LOGGERS, *_SCHEDULER_LOGGERS):
        _logger_config(jvm, config, name).addFilter(quoting)
    context.updateLoggers()


def _aborting_job_lines(spark: Any, quiet: bool) -> None:
    """Drop (or log again) TaskSetManager's "failed N times; aborting job" line."""
    global _aborting_job_filter
    jvm = spark._jvm
    core = jvm.org.apache.logging.log4j.core
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    logger = _logger_config(jvm, context.getConfiguration(), _SCHEDULER_LOGGERS[0])
    if quiet:
        deny, neutral = core.Filter.Result.DENY, core.Filter.Result.NEUTRAL
        _aborting_job_filter = core.filter.RegexFilter.createFilter(_ABORTING_JOB, None, False, deny, neutral)
        logger.addFilter(_aborting_job_filter)
    elif _aborting_job_filter is not None:
        logger.removeFilter(_aborting_job_filter)
        _aborting_job_filter = None
    context.updateLoggers()


def _begin(spark: Any, message: str) -> bool:
    """Count an expected failure in (filters installed, the aborting-job line dropped); False when the
    JVM's logging cannot be changed (logged once: quieter logs are not worth failing a batch for)."""
    global _under_way
    with _lock:
        if _unchangeable:
            return False
        try:
            if message not in _installed:
                _install(spark, message)
                _installed.add(message)
            if _under_way == 0:
                _aborting_job_lines(spark, quiet=True)
        except Exception as exc:  # py4j's or the JVM's (another log4j, a Spark that moved a class…)
            _unchangeable.append(str(exc))
            log.warning("Spark will log dead letters stopping one-pass batches as errors: %s", exc)
            return False
        _under_way += 1
        return True


def _end(spark: Any) -> None:
    global _under_way
    with _lock:
        _under_way -= 1
        if _under_way == 0:
            try:
                _aborting_job_lines(spark, quiet=False)
            except Exception as exc:  # as in `_begin`: the batch's own outcome matters more
                log.warning("cannot restore TaskSetManager's aborting-job line: %s", exc)


@contextmanager
def quiet_expected_failure(spark: Any, message: str) -> Iterator[None]:
    """Within: a Spark job this thread runs that fails with an error saying `message` logs nothing of it,
    and its other tasks end uninterrupted."""
    context = spark.sparkContext
    interrupt_on_cancel = context.getLocalProperty(INTERRUPT_ON_CANCEL)
    context.setLocalProperty(INTERRUPT_ON_CANCEL, "false")
    try:
        with _quiet(spark, message):
            yield
    finally:
        context.setLocalProperty(INTERRUPT_ON_CANCEL, interrupt_on_cancel)


@contextmanager
def _quiet(spark: Any, message: str) -> Iterator[None]:
    """Within: what the loggers log for a failure saying `message` is dropped."""
    if not _begin(spark, message):
        yield
        return
    # Marks this thread (the write's) and, through the job's local properties, its tasks' threads.
    thread_context = spark._jvm.org.apache.logging.log4j.ThreadContext
    spark.sparkContext.setLocalProperty(CONTEXT_KEY, message)
    thread_context.put(CONTEXT_KEY, message)
    try:
        yield
    finally:
        thread_context.remove(CONTEXT_KEY)
        spark.sparkContext.setLocalProperty(CONTEXT_KEY, None)
        _end(spark)
