"""Maven pins and other launcher data kept as files in `devtools/data/` (shipped as package data)."""

from __future__ import annotations

from importlib import resources

from runtime.artifacts import Artifact


def data_text(name: str) -> str:
    """The text of `devtools/data/<name>`."""
    return (resources.files("devtools") / "data" / name).read_text(encoding="utf-8")


def pin_lines(name: str) -> list[str]:
    """The lines of a pin file without blank lines and `#` comments, stripped."""
    return [
        line.strip()
        for line in data_text(name).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def maven_artifact(coordinates: str, sha1: str) -> Artifact:
    """`group:name:version[:classifier]` and its SHA-1 as an artifact to fetch."""
    group, name, version, *classifier = coordinates.split(":")
    if len(classifier) > 1:
        raise ValueError(f"Not Maven coordinates: {coordinates!r}")
    return Artifact(group, name, version, sha1, classifier=classifier[0] if classifier else "")
