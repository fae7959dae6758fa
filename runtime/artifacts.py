"""Pinned Maven Central artifacts (jars and archives), fetched once, verified, and cached per user.

floe runs real JVM components (the Kafka broker, the Schema Registry, Spark's Iceberg/Kafka/Avro jars).
Each is pinned by coordinates and SHA-1 and cached in `~/.cache/floe/jars` (or `$FLOE_CACHE_DIR/jars`),
so a fresh clone reuses what an earlier one downloaded. An offline install points `FLOE_JARS_DIR` at a
folder that already holds the files: nothing is downloaded then, and a missing file is an error.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from runtime.settings import RuntimeSettings, read_settings


@dataclass(frozen=True, slots=True)
class Artifact:
    """One file of a Maven Central artifact, with the SHA-1 Maven Central publishes for it."""

    group: str
    name: str
    version: str
    sha1: str = ""
    classifier: str = ""
    extension: str = "jar"

    @property
    def file_name(self) -> str:
        suffix = f"-{self.classifier}" if self.classifier else ""
        return f"{self.name}-{self.version}{suffix}.{self.extension}"

    @property
    def url(self) -> str:
        repository = read_settings(RuntimeSettings).maven_repository
        return f"{repository}/{self.group.replace('.', '/')}/{self.name}/{self.version}/{self.file_name}"


def cache_dir() -> Path:
    """floe's per-user download cache (never inside the repository)."""
    explicit = read_settings(RuntimeSettings).cache_dir
    if explicit:
        return explicit.expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "floe"


def jar_dir() -> Path:
    offline = read_settings(RuntimeSettings).jars_dir
    return offline.expanduser() if offline else cache_dir() / "jars"


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=300) as response:
        data: bytes = response.read()
        return data


class DownloadProgress(Protocol):
    """Told about each download as it happens (`floe up` draws progress bars from it)."""

    def started(self, artifact: Artifact, total_bytes: int | None) -> None: ...

    def advanced(self, artifact: Artifact, chunk_bytes: int) -> None: ...

    def finished(self, artifact: Artifact) -> None: ...


def _download_to(
    url: str, target: Path, artifact: Artifact | None = None, progress: DownloadProgress | None = None
) -> str:
    """Stream `url` into `target` (an archive may be hundreds of MB: never held in memory); its SHA-1."""
    digest = hashlib.sha1()
    with urllib.request.urlopen(url, timeout=300) as response, target.open("wb") as out:
        if artifact is not None and progress is not None:
            length = response.headers.get("Content-Length")
            progress.started(artifact, int(length) if length and length.isdigit() else None)
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
            if artifact is not None and progress is not None:
                progress.advanced(artifact, len(chunk))
    if artifact is not None and progress is not None:
        progress.finished(artifact)
    return digest.hexdigest()


def missing(artifacts: Iterable[Artifact], directory: Path | None = None) -> list[Artifact]:
    """The artifacts not in the cache yet: what a first run downloads."""
    directory = directory or jar_dir()
    return [a for a in artifacts if not (directory / a.file_name).exists()]


def fetch(
    artifact: Artifact, directory: Path | None = None, progress: DownloadProgress | None = None
) -> Path:
    """The artifact's file from the cache, downloaded and SHA-1-verified first when missing."""
    directory = directory or jar_dir()
    target = directory / artifact.file_name
    if target.exists():
        return target
    if read_settings(RuntimeSettings).jars_dir:
        raise FileNotFoundError(f"{artifact.file_name} is not in FLOE_JARS_DIR ({directory}); offline mode")
    directory.mkdir(parents=True, exist_ok=True)
    expected = artifact.sha1 or _download(artifact.url + ".sha1").decode().split()[0].strip().lower()
    # Written under a name of this process's own, then renamed: an interrupted download never leaves a
    # truncated file in the cache, and two processes filling one cache (containers sharing a volume)
    # never write into the same partial file.
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        actual = _download_to(artifact.url, partial, artifact, progress)
        if actual != expected:
            raise RuntimeError(f"SHA-1 mismatch for {artifact.url}: expected {expected}, got {actual}")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def fetch_all(
    artifacts: Iterable[Artifact], directory: Path | None = None, progress: DownloadProgress | None = None
) -> list[Path]:
    return [fetch(artifact, directory, progress) for artifact in artifacts]
