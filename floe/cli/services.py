"""What the long-running service commands (`floe ingest`, `floe maintain`, `floe up`) share."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.text import Text

from catalog.client import ClientError, FloeClient
from floe.cli.errors import port_option_error
from floe.cli.output import console, printable
from runtime.leases import Lease, group_name

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


# `floe up`'s terminal: its own lines (`catalog on … (1.2 s)`) carry no time, nor do its log lines.
TERMINAL_FORMAT = "%(levelname)s %(name)s: %(message)s"


class TerminalLogHandler(logging.Handler):
    """Log lines printed through the command's Rich console (stderr), as its own lines are: in the
    same format, never torn by a spinner, control characters in a message shown as escapes."""

    def __init__(self, output: Console | None = None) -> None:
        super().__init__()
        self.output = output or console
        self.setFormatter(logging.Formatter(TERMINAL_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = printable(self.format(record))
            self.output.print(Text(line), highlight=False, soft_wrap=True)
        except Exception:
            self.handleError(record)


def configure_logging(
    level: str, *, quiet: tuple[str, ...] = ("py4j", "httpx"), timestamps: bool = True
) -> None:
    """Service logs on stderr with time, level and logger (`timestamps=False`: as `floe up` prints its
    own lines, level and logger only); the `quiet` loggers (py4j's and httpx's line per call) only from
    WARNING up."""
    if timestamps:
        logging.basicConfig(
            level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
        )
    else:
        logging.basicConfig(level=level.upper(), handlers=[TerminalLogHandler()])
    for noisy in quiet:
        logging.getLogger(noisy).setLevel(logging.WARNING)


def check_java() -> None:
    """A Java for Spark, before anything starts (JavaNotFound says what is missing and how to get it)."""
    from runtime.java import JavaNotFound, spark_java_home

    try:
        spark_java_home()
    except JavaNotFound as exc:
        raise click.ClickException(str(exc)) from exc


def check_catalog(url: str, client_id: str, client_secret: str, purpose: str) -> None:
    """One token from floe before a service starts Spark: an unreachable catalog or refused credentials
    end the command with one message at once, rather than a retry loop of warnings."""
    try:
        with FloeClient(url, client_id, client_secret, purpose=purpose) as client:
            client.authenticate()
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc


def serve_metrics(registry: CollectorRegistry, port: int, host: str) -> None:
    """The service's Prometheus endpoint on `host:port` (0: none); a taken port names --metrics-port."""
    from prometheus_client import start_http_server

    if not port:
        return
    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise port_option_error(port, "--metrics-port", host) from exc
    console.print(f"metrics on http://{host}:{port}/metrics", highlight=False)


def lower_cpu_priority(nice: int) -> int:
    """This process at niceness `nice` at least (an operator's own higher `nice` stands), and with it
    every process it starts next (Spark's JVM): background work takes the CPU that ingestion and the
    catalog leave idle, as RocksDB runs its compactions. Returns the niceness now (0 where the
    platform has none). Lowering one's own priority needs no privilege."""
    if not hasattr(os, "setpriority"):
        return 0
    current = os.getpriority(os.PRIO_PROCESS, 0)
    target = max(current, nice)
    if target > current:
        # Linux keeps a niceness per thread, and a new thread or process takes its creator's: every
        # thread already running (a library's own) is lowered too.
        tasks = Path("/proc/self/task")
        ids = [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [0]
        for thread_id in ids:
            with contextlib.suppress(ProcessLookupError):
                os.setpriority(os.PRIO_PROCESS, thread_id, target)
    if target > 0:
        _lower_autogroup(target)
    return target


def _lower_autogroup(nice: int) -> None:
    """Linux's autogroups share the CPU between sessions first, and by niceness only within one: a
    process niced in a session of its own (a service, `setsid`, a supervisor's child) would still
    take as much as `floe ingest` in another. A session leader lowers its session's group too; in
    a session it shares (a shell's job) niceness already orders it against its neighbours."""
    if os.getsid(0) != os.getpid():
        return
    current = autogroup_nice("self")
    if current is not None and nice > current:
        with contextlib.suppress(OSError):
            Path("/proc/self/autogroup").write_text(str(nice))


def autogroup_nice(pid: int | str) -> int | None:
    """The niceness of process `pid`'s autogroup (`/autogroup-17 nice 0`), None without one."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/autogroup").read_text().split("nice")[1])
    return None


def parse_spark_conf(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--spark-conf KEY=VALUE` options as Spark settings."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--spark-conf")
        conf[key.strip()] = value.strip()
    return conf


def parse_shard_option(value: str) -> tuple[int, int] | None:
    """`--shard`: `i/n` as (i, n), or `auto` as None (leases in floe: `start_lease`)."""
    return None if value == "auto" else parse_shard(value)


def start_lease(
    url: str,
    client_id: str,
    client_secret: str,
    role: str,
    filters: Iterable[str] = (),
    on_members: Callable[[int], None] = lambda _count: None,
) -> Lease:
    """`--shard auto`: take this instance's lease in the group of `role` with the same `filters` and
    keep renewing it (`runtime.leases`); a clear error when floe refuses it (a reader key, say).
    Its `stop()` ends it."""
    client = FloeClient(url, client_id, client_secret, purpose=f"the {role} lease")

    def renew(group: str, member: str, ttl_seconds: float) -> list[str]:
        return [holder.member for holder in client.renew_lease(group, member, ttl_seconds).members]

    def end(group: str, member: str) -> None:
        try:
            client.end_lease(group, member)
        finally:
            client.close()

    lease = Lease(renew, end, group_name(role, filters), on_members=on_members)
    try:
        lease.start()
    except ClientError as exc:
        client.close()
        raise click.ClickException(f"cannot take a lease for --shard auto: {exc}") from None
    console.print(
        f"[bold]floe {role}[/bold]: instance {lease.member} of {lease.group}, {len(lease.members)} live",
        highlight=False,
    )
    return lease


def parse_shard(value: str) -> tuple[int, int]:
    """`--shard i/n` as (i, n), 0 <= i < n (`floe ingest` and `floe maintain`)."""
    index, _, count = value.partition("/")
    try:
        shard = (int(index), int(count))
    except ValueError:
        shard = (-1, 0)
    if not 0 <= shard[0] < shard[1]:
        message = f"expected i/n with 0 <= i < n, e.g. 0/2; got {value!r}"
        raise click.BadParameter(message, param_hint="--shard")
    return shard
