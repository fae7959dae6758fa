"""`floe up`'s maintenance: a worker per source cluster on floe up's Spark session, each under the
cluster's `pipeline-maintain-<cluster>` key (never the admin key), in a Spark pool of their own."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from rich.text import Text

from catalog.client import ClientError
from floe.cli.output import console, printable
from floe.cli.pipeline_keys import MAINTAIN, PipelineKeys

MAINTENANCE_JOB_GROUP = "floe-maintenance"
# The first look at the tables waits this long, so that it never competes with the first batches for a
# laptop's cores.
MAINTENANCE_FIRST_DELAY_SECONDS = 60.0
# How often the supervisor looks for source clusters added since (`floe apply`).
CLUSTER_CHECK_SECONDS = 60.0
# The share of a core each worker's thread may use (`maintenance.cpu_share`): its Python work takes the
# GIL that ingestion's threads in this process need, and niceness cannot order threads that share it.
MAINTENANCE_CPU_SHARE = 0.25

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class UpMaintenance:
    """Starts a maintenance worker for each source cluster the pipeline names (checked every minute),
    stops them all with `stop`."""

    def __init__(
        self,
        spark: SparkSession,
        keys: PipelineKeys,
        url: str,
        warehouse: str,
        clusters: Callable[[], Iterable[str]],
    ) -> None:
        self.spark = spark
        self.keys = keys
        self.url = url
        self.warehouse = warehouse
        self.clusters = clusters
        self._stop = threading.Event()
        self._workers: dict[str, threading.Thread] = {}
        self._supervisor: threading.Thread | None = None

    def start(self) -> None:
        self._supervisor = threading.Thread(target=self._supervise, name="floe-maintenance", daemon=True)
        self._supervisor.start()

    def _supervise(self) -> None:
        if self._stop.wait(MAINTENANCE_FIRST_DELAY_SECONDS):
            return
        while not self._stop.is_set():
            try:
                wanted = sorted(set(self.clusters()))
            except ClientError as exc:
                log.warning("maintenance: cannot read the pipeline's clusters (will retry): %s", exc)
                wanted = []
            for cluster in wanted:
                if cluster not in self._workers and not self._stop.is_set():
                    thread = threading.Thread(
                        target=self._run_worker,
                        args=(cluster,),
                        name=f"floe-maintenance-{cluster}",
                        daemon=True,
                    )
                    self._workers[cluster] = thread
                    thread.start()
            self._stop.wait(CLUSTER_CHECK_SECONDS)

    def _run_worker(self, cluster: str) -> None:
        from catalog.pipelines.maintenance import DEFAULT_POLICY
        from maintenance.worker import MaintenanceWorker, WorkerOptions

        try:
            key = self.keys.key(MAINTAIN, cluster)
        except ClientError as exc:
            if not self._stop.is_set():
                console.print(
                    Text(printable(f"maintenance of {cluster} not started: {exc}"), style="yellow"),
                    highlight=False,
                )
            return
        options = WorkerOptions(
            url=self.url,
            client_id=key.client_id,
            client_secret=key.client_secret,
            default_warehouse=self.warehouse,
            defaults=DEFAULT_POLICY,
            cpu_share=MAINTENANCE_CPU_SHARE,
        )
        # Spark's pool and job group are the calling thread's own: set in each worker's thread.
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", "maintenance")
        self.spark.sparkContext.setJobGroup(
            MAINTENANCE_JOB_GROUP, "floe up maintenance", interruptOnCancel=True
        )
        worker = MaintenanceWorker(self.spark, options)
        try:
            worker.run_forever(self._stop)
        except Exception as exc:  # floe up goes on ingesting; the log says why maintenance stopped
            if not self._stop.is_set():
                console.print(
                    Text(printable(f"maintenance of {cluster} stopped: {exc}"), style="yellow"),
                    highlight=False,
                )
        finally:
            worker.close()

    def stop(self) -> None:
        """Stop the workers before the session and the catalog they use: a pass in flight is cancelled
        (its Spark jobs), and what it then reports about the cancellation is not a user's concern."""
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=10)
        running = [t for t in self._workers.values() if t.is_alive()]
        if not running:
            return
        logging.getLogger("maintenance").setLevel(logging.CRITICAL)
        self.spark.sparkContext.cancelJobGroup(MAINTENANCE_JOB_GROUP)
        for thread in running:
            thread.join(timeout=60)
