"""Finding a Java runtime for floe's JVM components (Spark, and the development Kafka broker and schema
registry)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path


class JavaNotFound(RuntimeError):
    """No usable Java: none where JAVA_HOME or PATH points, or one too old."""


# How to get a Java when none is found (what the error messages suggest).
JAVA_INSTALL_HINT = "install a JDK such as Eclipse Temurin 17+ and put it on PATH, or set JAVA_HOME"


@functools.cache
def java_version_text(java: str) -> str:
    """What `java -version` prints (once per executable and process)."""
    result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    return result.stderr + result.stdout


def java_major_version(java: str) -> int:
    text = java_version_text(java)
    # `openjdk version "17.0.15"`, `java version "1.8.0_392"`, `openjdk version "25"`.
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if match is None:
        raise RuntimeError(f"Cannot tell the Java version of {java}: {text[:500]}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def find_java(needed_by: str, install_hint: str, minimum: int = 17) -> str:
    """`$JAVA_HOME/bin/java`, else `java` on PATH, checked to be Java `minimum` or newer; the errors
    say what `needed_by` needs and how to get it."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java: str | None = str(Path(java_home).expanduser() / "bin" / "java")
        where = f"JAVA_HOME ({java_home})"
    else:
        java = shutil.which("java")
        where = "PATH"
    if java is None or not Path(java).is_file():
        raise JavaNotFound(f"No java found in {where}: {needed_by} needs Java {minimum}+ ({install_hint})")
    major = java_major_version(java)
    if major < minimum:
        raise JavaNotFound(
            f"{java} is Java {major}; {needed_by} needs Java {minimum}+ (set JAVA_HOME to one)"
        )
    return java


def java_home() -> str | None:
    """A Java 17+ for Spark: JAVA_HOME when set, else the `java` on PATH (None lets Spark decide)."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return str(Path(java).resolve().parent.parent) if java else None


def spark_java_home() -> str:
    """The Java home Spark runs with, checked first (JavaNotFound says what is missing, rather than
    Spark's "Java gateway process exited")."""
    java = find_java("Spark", JAVA_INSTALL_HINT, minimum=17)
    return os.environ.get("JAVA_HOME") or str(Path(java).resolve().parent.parent)
