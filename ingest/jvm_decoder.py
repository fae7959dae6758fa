"""floe's JVM classes (ingest/jvm/floe/ingest/*.java) as one jar for Spark.

The sources ship with floe and are compiled at first use with the JDK's `javac` against pyspark's
jars, protobuf-java and Iceberg's Spark runtime (both `runtime.spark.SPARK_JARS`), then cached in
floe's cache folder under the hash of what went into it (sources, those jars, pyspark version): later
runs and other checkouts of the same sources reuse it. A running session gets it at first use (the
protobuf decoder, the JSON undeclared-keys UDF, the staged-append commit): `addJar` ships it to the
executors, and the driver loads its classes through a class loader of its own (the jars of a session
are fixed when its JVM starts), whose parent has Spark's and Iceberg's classes: Iceberg's driver-side
singletons (the FileRewriteCoordinator the staged-append commit reads) are the ones Spark's writes use.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from runtime.artifacts import cache_dir, fetch
from runtime.java import spark_java_home
from runtime.spark import SPARK_JARS

SOURCE = Path(__file__).resolve().parent / "jvm" / "floe" / "ingest" / "ProtobufDecoder.java"
# Every class of the jar: the protobuf decoder, the JSON decoder (JsonDecoder), the JSON undeclared-keys
# scan (JsonUndeclaredKeys) and the staged-append commit (StagedAppend).
SOURCES = tuple(sorted(SOURCE.parent.glob("*.java")))
CLASS_NAME = "floe.ingest.ProtobufDecoder"
JSON_KEYS_CLASS_NAME = "floe.ingest.JsonUndeclaredKeys"
JSON_DECODER_CLASS_NAME = "floe.ingest.JsonDecoder"
STAGED_APPEND_CLASS_NAME = "floe.ingest.StagedAppend"
# The bytecode level: Spark 4.0's minimum Java.
JAVA_RELEASE = "17"


class DecoderBuildError(RuntimeError):
    """The decoder could not be compiled (no JDK compiler, or javac failed)."""


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _spark_jar(name: str) -> Path:
    artifact = next(a for a in SPARK_JARS if a.name == name)
    return fetch(artifact)


def _protobuf_java() -> Path:
    return _spark_jar("protobuf-java")


def _iceberg_runtime() -> Path:
    return _spark_jar("iceberg-spark-runtime-4.0_2.13")


def _javac() -> Path:
    javac = Path(spark_java_home()) / "bin" / "javac"
    if not javac.is_file():
        raise DecoderBuildError(
            f"no javac in {javac.parent}: floe's protobuf decoder is compiled at first use and needs a JDK "
            "(not only a JRE); point JAVA_HOME at a JDK 17+"
        )
    return javac


def decoder_jar() -> Path:
    """The compiled decoder jar, built on first use and cached by the hash of its inputs."""
    import pyspark

    protobuf = _protobuf_java()
    iceberg = _iceberg_runtime()
    sources = [path.read_bytes() for path in SOURCES]
    digest = hashlib.sha256(
        b"\0".join(
            [
                *sources,
                protobuf.name.encode(),
                iceberg.name.encode(),
                pyspark.__version__.encode(),
                JAVA_RELEASE.encode(),
            ]
        )
    ).hexdigest()[:20]
    target = cache_dir() / "jvm" / f"floe-protobuf-decoder-{digest}.jar"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    javac = _javac()
    with tempfile.TemporaryDirectory(prefix="floe-javac-", dir=target.parent) as work:
        classes = Path(work) / "classes"
        classes.mkdir()
        classpath = os.pathsep.join([str(_pyspark_jars() / "*"), str(protobuf), str(iceberg)])
        result = subprocess.run(
            [
                *(str(javac), "--release", JAVA_RELEASE, "-nowarn", "-encoding", "UTF-8"),
                *("-cp", classpath, "-d", str(classes), *map(str, SOURCES)),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if result.returncode != 0:
            raise DecoderBuildError(
                f"javac failed on {SOURCE.parent}:\n{result.stdout}{result.stderr}"[:4000]
            )
        # Written under a name of this process's own, then renamed: a concurrent build never leaves a
        # half-written jar where another process looks for it.
        partial = Path(work) / "decoder.jar"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: floe\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
        shutil.move(str(partial), str(target))
    return target


# The jar's class loader per SparkContext (its JVM object's id): one loader per context, not per batch.
_LOADERS: dict[str, Any] = {}


def jar_class(spark: Any, class_name: str) -> Any:
    """A class of the jar as java.lang.Class in this session's driver, the jar added to the session
    (and its class loader made) the first time."""
    context = spark.sparkContext._jsc.sc()
    key = f"{context.applicationId()}:{context.hashCode()}"
    jvm = spark._jvm
    loader = _LOADERS.get(key)
    if loader is None:
        jar = decoder_jar()
        spark.sparkContext._jsc.addJar(str(jar))  # executors fetch it before their next task
        urls = spark.sparkContext._gateway.new_array(jvm.java.net.URL, 1)
        urls[0] = jvm.java.io.File(str(jar)).toURI().toURL()
        # Spark's own classes (and protobuf-java, one of the session's jars) come from the parent.
        parent = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader = _LOADERS[key] = jvm.java.net.URLClassLoader(urls, parent)
    return jvm.java.lang.Class.forName(class_name, True, loader)


def _invoke(spark: Any, class_name: str, method: str, arguments: list[tuple[Any, Any]]) -> Any:
    """Call the jar class's static `method` with `arguments` (value, java.lang.Class of its parameter).
    A failure arrives as InvocationTargetException with the method's own exception as its cause."""
    gateway = spark.sparkContext._gateway
    jvm = spark._jvm
    types = gateway.new_array(jvm.java.lang.Class, len(arguments))
    values = gateway.new_array(jvm.java.lang.Object, len(arguments))
    for index, (value, parameter_type) in enumerate(arguments):
        types[index] = parameter_type
        values[index] = value
    return jar_class(spark, class_name).getMethod(method, types).invoke(None, values)


def _register(spark: Any, class_name: str, name: str, argument: Any, argument_type: Any) -> None:
    """Call the jar class's static `register(SparkSession, String name, <argument_type> argument)`."""
    lang = spark._jvm.java.lang
    _invoke(
        spark,
        class_name,
        "register",
        [
            (spark._jsparkSession, lang.Class.forName("java.lang.Object")),
            (name, lang.Class.forName("java.lang.String")),
            (argument, argument_type),
        ],
    )


def register_decoder(spark: Any, name: str, result_type_json: str) -> None:
    """Register the decoder UDF in `spark` as `name`, returning Spark's JSON type `result_type_json`."""
    string = spark._jvm.java.lang.Class.forName("java.lang.String")
    _register(spark, CLASS_NAME, name, result_type_json, string)


def register_json_decoder(spark: Any, name: str, result_type_json: str) -> None:
    """Register in `spark` as the function `name` floe's JSON decoder returning Spark's JSON type
    `result_type_json` (the table's fields, then the corrupt and undeclared columns); its rows are
    Spark's internal values, so no per-row conversion follows it as one follows a Java UDF. A type it
    does not read (a map with non-string keys) is refused with DecoderBuildError."""
    string = spark._jvm.java.lang.Class.forName("java.lang.String")
    try:
        _register(spark, JSON_DECODER_CLASS_NAME, name, result_type_json, string)
    except Exception as exc:  # py4j's error around InvocationTargetException
        if "IllegalArgumentException" in str(exc):
            raise DecoderBuildError(f"floe's JSON decoder does not read this table: {exc}"[:1000]) from exc
        raise


def register_json_undeclared_keys(spark: Any, name: str, declared: list[str]) -> None:
    """Register in `spark` as `name` the UDF giving a JSON object value's top-level keys not in
    `declared` (array<string>; NULL when the value is not a JSON object it can read)."""
    names = spark.sparkContext._gateway.new_array(spark._jvm.java.lang.String, len(declared))
    for index, field_name in enumerate(declared):
        names[index] = field_name
    _register(spark, JSON_KEYS_CLASS_NAME, name, names, names.getClass())


def _call_static(spark: Any, class_name: str, method: str, *values: Any) -> Any:
    """Call the jar class's static `method(Object...)` with `values` (py4j converts str and int; pass
    Java objects for the rest)."""
    anything = spark._jvm.java.lang.Class.forName("java.lang.Object")
    return _invoke(spark, class_name, method, [(value, anything) for value in values])


def _java_string_map(spark: Any, values: dict[str, str]) -> Any:
    """`values` as a java.util.HashMap in the session's JVM."""
    mapping = spark._jvm.java.util.HashMap()
    for key, value in values.items():
        mapping.put(key, value)
    return mapping


def commit_staged_append(spark: Any, table: str, file_set_id: str, summary: dict[str, str]) -> int:
    """Commit as one append (with `summary`) the data files a Spark write of `table` staged under
    `file_set_id` (`StagedAppend.commit`); returns how many it added."""
    added = _call_static(
        spark, STAGED_APPEND_CLASS_NAME, "commit", spark._jsparkSession, table, file_set_id,
        _java_string_map(spark, summary),
    )  # fmt: skip
    return int(added)


def discard_staged_append(spark: Any, table: str, file_set_id: str) -> int:
    """Delete the data files a Spark write of `table` staged under `file_set_id`, if any."""
    return int(
        _call_static(spark, STAGED_APPEND_CLASS_NAME, "discard", spark._jsparkSession, table, file_set_id)
    )


__all__ = [
    "CLASS_NAME",
    "JSON_DECODER_CLASS_NAME",
    "JSON_KEYS_CLASS_NAME",
    "SOURCE",
    "SOURCES",
    "STAGED_APPEND_CLASS_NAME",
    "DecoderBuildError",
    "commit_staged_append",
    "decoder_jar",
    "discard_staged_append",
    "jar_class",
    "register_decoder",
    "register_json_undeclared_keys",
]
