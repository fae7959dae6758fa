"""The two ingesters as subprocesses, started and measured the same way: floe's `floe ingest` and the
plain Structured Streaming job (`benchmarks.ingest.plain_job`). Each is its own Python driver with its
own Spark JVM (local[N], the same driver memory and records per micro-batch)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.catalog.procstat import tree_pids
from devtools.catalog_server import CatalogProcess
from devtools.ports import free_port
from devtools.processes import stop_process
from runtime.java import spark_java_home

FLOE = "floe"
PLAIN = "plain"


@dataclass(frozen=True)
class SparkSettings:
    """What both ingesters get alike."""

    master: str = "local[2]"
    driver_memory: str = "2g"
    records_per_batch: int = 100_000  # floe's --max-records-per-batch, the job's maxOffsetsPerTrigger
    commit_interval_s: float = 2.0  # floe's --commit-interval, the job's processingTime trigger
    # Profiling only: each ingester's Spark JVM records a Java Flight Recording into its home directory.
    flight_recording: bool = False
    # floe's own `--spark-conf` settings (experiments with floe's session; the plain job keeps defaults).
    floe_spark_conf: tuple[str, ...] = ()


def java_options(settings: SparkSettings, home: Path) -> str:
    """The driver JVM options of an ingester (the executors of a local master run in it)."""
    options = "-Duser.timezone=UTC"
    if settings.flight_recording:
        # `profile.jfr` is dumped by `dump_flight_recording` before the stop; the JVM's own write at exit
        # goes elsewhere, or the kill that follows the stop would cut the dump short.
        options += f" -XX:StartFlightRecording=filename={home / 'profile-at-exit.jfr'},settings=profile"
    return options


class Ingester:
    """A started ingester subprocess (its own session: stopping it stops its Spark JVM too)."""

    kind: str

    def __init__(self, home: Path, command: list[str], env: dict[str, str]) -> None:
        self.home = home
        self.command = command
        self.env = env
        self.log_path = home / "ingester.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.flight_recording = False

    def start(self) -> Ingester:
        self.home.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def log_tail(self, characters: int = 4000) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text[-characters:]

    def dump_flight_recording(self) -> None:
        """Write the Spark JVM's flight recording to `home/profile.jfr` now (profiling runs): the JVM is
        stopped with its process group, too abruptly to write it at exit."""
        if self.process is None or self.process.poll() is not None:
            return
        for pid in tree_pids([self.process.pid]):
            with contextlib.suppress(OSError):
                if b"SparkSubmit" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    jcmd = Path(spark_java_home()) / "bin" / "jcmd"
                    subprocess.run(
                        [str(jcmd), str(pid), "JFR.dump", f"filename={self.home / 'profile.jfr'}"],
                        capture_output=True,
                        timeout=120,
                        check=False,
                    )

    def stop(self) -> None:
        if self.flight_recording:
            self.dump_flight_recording()
        stop_process(self.process)
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):  # anything of the group left (Spark's JVM)
                os.killpg(self.process.pid, signal.SIGKILL)


def _catalog_env(server: CatalogProcess) -> dict[str, str]:
    return {
        **os.environ,
        "FLOE_URL": server.url,
        "FLOE_CLIENT_ID": server.admin_client_id,
        "FLOE_CLIENT_SECRET": server.admin_client_secret,
    }


class FloeIngester(Ingester):
    """`floe ingest --cluster <cluster>`: every table of that source cluster in the applied floe.yaml."""

    kind = FLOE

    def __init__(self, server: CatalogProcess, home: Path, cluster: str, settings: SparkSettings) -> None:
        self.metrics_port = free_port()
        command = [
            sys.executable,
            "-m",
            "floe.cli",
            "ingest",
            "--cluster",
            cluster,
            "--master",
            settings.master,
            "--driver-memory",
            settings.driver_memory,
            "--max-records-per-batch",
            str(settings.records_per_batch),
            "--commit-interval",
            f"{settings.commit_interval_s:g}",
            "--metrics-port",
            str(self.metrics_port),
            "--state-dir",
            str(home / "state"),
        ]
        if settings.flight_recording:
            command += ["--spark-conf", f"spark.driver.extraJavaOptions={java_options(settings, home)}"]
        for pair in settings.floe_spark_conf:
            command += ["--spark-conf", pair]
        super().__init__(home, command, _catalog_env(server))
        self.flight_recording = settings.flight_recording

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def batch_seconds(self) -> dict[str, Any]:
        """`floe_ingest_batch_seconds` of every table: count, sum and cumulative buckets."""
        from prometheus_client.parser import text_string_to_metric_families

        try:
            text = httpx.get(self.metrics_url, timeout=10).text
        except httpx.HTTPError:
            return {}
        found: dict[str, Any] = {"count": 0, "sum": 0.0, "buckets": {}}
        for family in text_string_to_metric_families(text):
            if family.name != "floe_ingest_batch_seconds":
                continue
            for sample in family.samples:
                if sample.name.endswith("_count"):
                    found["count"] += int(sample.value)
                elif sample.name.endswith("_sum"):
                    found["sum"] += sample.value
                elif sample.name.endswith("_bucket"):
                    bound = sample.labels["le"]
                    found["buckets"][bound] = found["buckets"].get(bound, 0) + int(sample.value)
        return found


class PlainJob(Ingester):
    """The plain Structured Streaming job on one topic, writing `floe.<namespace>.<table>`."""

    kind = PLAIN

    def __init__(
        self,
        server: CatalogProcess,
        home: Path,
        bootstrap: str,
        topic: str,
        table: str,
        settings: SparkSettings,
    ) -> None:
        self.progress_path = home / "progress.jsonl"
        command = [
            sys.executable,
            "-m",
            "benchmarks.ingest.plain_job",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--table",
            table,
            "--checkpoint",
            str(home / "checkpoint"),
            "--progress",
            str(self.progress_path),
            "--master",
            settings.master,
            "--driver-memory",
            settings.driver_memory,
            "--trigger-seconds",
            f"{settings.commit_interval_s:g}",
            "--max-offsets-per-trigger",
            str(settings.records_per_batch),
        ]
        if settings.flight_recording:
            command += ["--java-options", java_options(settings, home)]
        super().__init__(home, command, _catalog_env(server))
        self.flight_recording = settings.flight_recording

    def progress(self) -> list[dict[str, Any]]:
        """Spark's progress of every micro-batch so far."""
        if not self.progress_path.exists():
            return []
        return [json.loads(line) for line in self.progress_path.read_text().splitlines() if line.strip()]
