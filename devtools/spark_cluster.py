"""A Spark standalone cluster on loopback from the pyspark installation: one master and N workers.

The same classes a real standalone cluster runs (`org.apache.spark.deploy.master.Master`,
`...worker.Worker`), started with pyspark's own `bin/spark-class` and jars, so `floe ingest` and
`floe maintain` can be pointed at `spark://127.0.0.1:<port>` exactly as at a production cluster. Each
worker runs in its own process group with the executors it launches, so `kill_worker` takes a node
down the way a lost machine does. The workers' environment holds no floe code (no PYTHONPATH): what
executors need comes from the driver.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from devtools.ports import free_port
from runtime.java import java_home

# An executor's log lines for a task starting and ending (finished, failed or killed).
_TASK_EVENT = re.compile(
    r"Executor: (?P<event>Running|Finished|Exception in|Executor killed) task (?P<index>\d+)\.\d+ "
    r"in stage (?P<stage>\d+)\.\d+ \(TID (?P<tid>\d+)\)"
)


@dataclass(frozen=True)
class Task:
    """One task attempt as an executor logged it: Spark's task id, and the stage and partition it
    computes (a retry of the same work has the same stage and index and a new id)."""

    tid: int
    stage: int
    index: int


def spark_home() -> Path:
    """pyspark's installation: `bin/spark-class`, `jars/` and `sbin/` of the Spark it bundles."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class _Node:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    web_port: int


class LocalSparkCluster:
    """A master and `workers` workers (`cores` cores and `memory` each), all bound to 127.0.0.1."""

    def __init__(self, base_dir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.base_dir = base_dir
        self.worker_count = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.master: _Node | None = None
        self.workers: list[_Node] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _environment(self) -> dict[str, str]:
        """What the daemons inherit: Spark's home and a Java, loopback only, and no floe on any path."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "SPARK_"))}
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_HOSTNAME="127.0.0.1",
            SPARK_NO_DAEMONIZE="1",
            SPARK_DAEMON_MEMORY="256m",
        )
        home = java_home()
        if home:
            env["JAVA_HOME"] = home
        return env

    def _start(self, name: str, main_class: str, args: list[str]) -> _Node:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.base_dir / f"{name}.log"
        web_port = free_port()
        command = [
            str(spark_home() / "bin" / "spark-class"),
            main_class,
            *args,
            "--webui-port",
            str(web_port),
        ]
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                command,
                env=self._environment(),
                cwd=self.base_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: the worker with the executors it launches
            )
        return _Node(name, process, log_path, web_port)

    def start(self, timeout: float = 90) -> LocalSparkCluster:
        self.master = self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            ["--host", "127.0.0.1", "--port", str(self.port)],
        )
        for index in range(self.worker_count):
            self.add_worker(f"worker-{index + 1}")
        self.wait_for_workers(self.worker_count, timeout)
        return self

    def add_worker(self, name: str) -> None:
        """Start one more worker (a replacement node) registering with the master."""
        work_dir = self.base_dir / name
        work_dir.mkdir(parents=True, exist_ok=True)
        args = ["--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory]
        args += ["--work-dir", str(work_dir), self.master_url]
        self.workers.append(self._start(name, "org.apache.spark.deploy.worker.Worker", args))

    def state(self) -> dict[str, Any]:
        """The master's view (its web UI's JSON): workers, their cores, running applications."""
        assert self.master is not None
        answer = httpx.get(f"http://127.0.0.1:{self.master.web_port}/json/", timeout=30)
        answer.raise_for_status()
        state: dict[str, Any] = answer.json()
        return state

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def wait_for_workers(self, count: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in [self.master, *self.workers]:
                if node is not None and node.process.poll() is not None:
                    raise RuntimeError(f"Spark {node.name} exited: {self.log_tail(node)}")
            with contextlib.suppress(httpx.HTTPError):
                if len(self.alive_workers()) >= count:
                    return
            time.sleep(0.3)
        raise RuntimeError(f"{count} Spark workers did not register: {self.log_tail(self.master)}")

    def running_workers(self) -> list[_Node]:
        return [node for node in self.workers if node.process.poll() is None]

    def applications(self, node: _Node) -> set[str]:
        """The applications that have an executor on worker `node` (its web UI's JSON)."""
        answer = httpx.get(f"http://127.0.0.1:{node.web_port}/json/", timeout=30).json()
        return {str(executor["appid"]) for executor in answer.get("executors", [])}

    def tasks(self, node: _Node, app_id: str) -> tuple[set[Task], set[Task]]:
        """The tasks executors of `app_id` on `node` have started, and those that ended (finished,
        failed or killed), from their logs: a local file read, fast enough to catch a task running."""
        started: set[Task] = set()
        ended: set[Task] = set()
        for log in (self.base_dir / node.name / app_id).glob("*/stderr"):
            for line in log.read_text(errors="replace").splitlines():
                match = _TASK_EVENT.search(line)
                if match:
                    task = Task(int(match["tid"]), int(match["stage"]), int(match["index"]))
                    (started if match["event"] == "Running" else ended).add(task)
        return started, ended

    def finished(self, node: _Node, app_id: str) -> set[Task]:
        """The tasks of `app_id` that finished on `node` (ended without failure or kill)."""
        done: set[Task] = set()
        for log in (self.base_dir / node.name / app_id).glob("*/stderr"):
            for match in _TASK_EVENT.finditer(log.read_text(errors="replace")):
                if match["event"] == "Finished":
                    done.add(Task(int(match["tid"]), int(match["stage"]), int(match["index"])))
        return done

    def kill_worker(self, node: _Node) -> None:
        """SIGKILL to the worker and its executors at once: no shutdown hooks, as a lost machine."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.process.pid, signal.SIGKILL)
        node.process.wait(timeout=30)

    def log_tail(self, node: _Node | None, characters: int = 3000) -> str:
        if node is None or not node.log_path.exists():
            return ""
        return node.log_path.read_text(errors="replace")[-characters:]

    def stop(self) -> None:
        for node in [*self.workers, self.master]:
            if node is None or node.process.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, signal.SIGTERM)
            try:
                node.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)
                node.process.wait()

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
