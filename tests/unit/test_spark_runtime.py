"""What floe asks of a Spark cluster's executors: Spark and Java, no Python.

JSON and Avro decoding are Spark SQL expressions, protobuf decoding is floe's Java UDF (ingest/jvm) and
maintenance runs Iceberg's procedures, so on a cluster (tests/e2e/test_spark_cluster.py) executors need
no Python environment and no floe installation. README "Running on a Spark cluster" says exactly that.
A Python UDF, `rdd` or `mapInPandas` in ingest/ or maintenance/ would widen what executors need: this
test names such a change, so it comes with its cluster story.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runtime.spark import JAVA_OPTIONS, is_local_master, java_options

ROOT = Path(__file__).resolve().parents[2]
# Spark APIs that ship Python functions (or Python-side data) to the executors.
EXECUTOR_PYTHON = frozenset(
    {
        "udf",  # also spark.udf.register
        "pandas_udf",
        "udtf",
        "UserDefinedFunction",
        "rdd",
        "mapInPandas",
        "mapInArrow",
        "applyInPandas",
        "applyInPandasWithState",
        "applyInArrow",
        "foreachPartition",
        "transformWithStateInPandas",
    }
)


def _names(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.ImportFrom):
            found.update(alias.name for alias in node.names)
    return found


def test_floe_python_never_runs_on_executors() -> None:
    used = {
        f"{path.relative_to(ROOT).as_posix()}: {name}"
        for package in ("ingest", "maintenance")
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in _names(ast.parse(path.read_text())) & EXECUTOR_PYTHON
    }
    assert used == set(), "Python that Spark runs on executors (see this module's docstring)"


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[*]", True),
        ("local[2]", True),
        ("local[2,3]", True),
        ("spark://127.0.0.1:7077", False),
        ("k8s://https://kubernetes.default.svc", False),
        ("yarn", False),
        ("localhost", False),
    ],
)
def test_only_local_masters_keep_the_driver_on_loopback(master: str, local: bool) -> None:
    assert is_local_master(master) is local


DRIVER, EXECUTOR = JAVA_OPTIONS


@pytest.mark.parametrize(
    ("master", "key", "extra", "expected"),
    [
        # A local master's JVM runs the executors: the throughput collector (measured faster for ingest).
        ("local[2]", DRIVER, "", "-Duser.timezone=UTC -XX:+UseParallelGC"),
        # A caller's options come after floe's: the time zone stays UTC unless they set it themselves.
        ("local[*]", DRIVER, "-Xss4m", "-Duser.timezone=UTC -XX:+UseParallelGC -Xss4m"),
        # A caller choosing a collector gets it alone (two collectors stop the JVM from starting).
        ("local[2]", DRIVER, "-XX:+UseG1GC", "-Duser.timezone=UTC -XX:+UseG1GC"),
        ("local", DRIVER, "-XX:+UseZGC -Xmx1g", "-Duser.timezone=UTC -XX:+UseZGC -Xmx1g"),
        # A cluster's driver and every executor keep the JVM's own choice.
        ("spark://h:7077", DRIVER, "", "-Duser.timezone=UTC"),
        ("local[2]", EXECUTOR, "", "-Duser.timezone=UTC"),
    ],
)
def test_java_options_keep_utc_and_pick_the_local_collector(
    master: str, key: str, extra: str, expected: str
) -> None:
    assert java_options(master, key, extra) == expected
