"""What the long-running service commands (`floe ingest`, `floe maintain`, `floe up`) share."""

from __future__ import annotations

import logging
import sys

import click


def configure_logging(level: str, *, quiet: tuple[str, ...] = ("py4j", "httpx")) -> None:
    """Service logs on stderr with time, level and logger; the `quiet` loggers (py4j's and httpx's
    line per call) only from WARNING up."""
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    for noisy in quiet:
        logging.getLogger(noisy).setLevel(logging.WARNING)


def parse_spark_conf(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--spark-conf KEY=VALUE` options as Spark settings."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--spark-conf")
        conf[key.strip()] = value.strip()
    return conf
