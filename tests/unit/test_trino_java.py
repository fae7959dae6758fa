"""Finding a Java 24+ for Trino (devtools/trino.py): an explicit choice is checked, and the errors say what
to install."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.trino import MINIMUM_JAVA, find_trino_java
from runtime.java import java_major_version


def test_an_explicit_home_without_java_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLOE_TRINO_JAVA_HOME", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"has no java; Trino 476 needs Java 24\+ \(install a JDK 24\+"):
        find_trino_java()


def test_an_explicit_home_with_an_old_java_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A `java` that answers `-version` as Java 21 does: only the version check is under test.
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'openjdk version \"21.0.2\" 2024-01-16' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("FLOE_TRINO_JAVA_HOME", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"has Java 21; Trino 476 needs Java 24\+"):
        find_trino_java()


def test_the_newest_jdk_found_is_24_or_newer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOE_TRINO_JAVA_HOME", raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert java_major_version(find_trino_java()) >= MINIMUM_JAVA
