"""A/B: floe from two (or more) source trees on one PostgreSQL, in one run.

```sh
git worktree add --detach /tmp/floe-before <commit>
.venv/bin/python -m benchmarks.catalog.ab_trees /tmp/floe-before . --workload load_table_etag
```

Each tree's `floe serve` runs with that tree first on `PYTHONPATH`, all on one database (seeded once),
and the chosen workloads are measured in rounds that alternate the order of the trees, so a change in
the machine's other load hits both alike: on a shared machine this is the comparison to trust, where two
separate runs of `python -m benchmarks.catalog` may differ by 2x. Prints req/s, CPU (server processes
plus PostgreSQL) per request and the machine's other load per tree; writes nothing.

`--workload token_and_load` is `benchmarks.catalog.query_tokens`' Trino-like query (a token request with
a cluster key's credentials, then loadTable with the token answered); its rate and CPU are per query.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from pathlib import Path

from benchmarks.catalog.procstat import postmaster_pid
from benchmarks.catalog.query_tokens import access_token, closed_loop_pairs
from benchmarks.catalog.run import Sample, Server, combine, sample, sample_of, warm_up
from benchmarks.catalog.token_endpoint import token_request
from benchmarks.catalog.workloads import (
    Dataset,
    Target,
    Workload,
    create_cluster_key,
    discover,
    seed,
    seed_read_table,
    workloads,
)
from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

TOKEN_AND_LOAD = "token_and_load"
# The cluster whose key the token-and-load queries use: floe makes its namespace, the dataset's.
TOKENS_DATASET = Dataset(suffix="_tokens")


def _pids_of(pids: list[int]) -> Callable[[], list[int]]:
    return lambda: pids


def _token_and_load(servers: list[Server], clients: int) -> Callable[[Server, float, float], Sample]:
    """A sampler of token-and-load queries on each server, with a new cluster key of `servers[0]`."""
    first = servers[0].target
    assert first.token is not None
    key = create_cluster_key(first.origin, first.token, TOKENS_DATASET.namespace)
    writers: dict[str, Target] = {}
    for server in servers:
        url = server.target.url
        token = access_token(url, key["client_id"], key["client_secret"])
        writers[server.target.name] = discover(server.target.name, url, token)
    seed_read_table(writers[first.name], TOKENS_DATASET)

    def run(server: Server, duration_s: float, warmup_s: float) -> Sample:
        writer = writers[server.target.name]
        request = token_request(writer, key["client_id"], key["client_secret"], scope="catalog")
        path = writer.table_path(TOKENS_DATASET.namespace, TOKENS_DATASET.read_table)
        return sample_of(
            server, lambda: (closed_loop_pairs(writer, request, path, clients, duration_s, warmup_s), {})
        )

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog.ab_trees", description=__doc__)
    parser.add_argument("trees", nargs="+", type=Path, help="floe source trees (their root directories)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--duration", type=float, default=4.0, help="measured seconds per round")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per round")
    parser.add_argument("--server-warmup", type=float, default=4.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workload", action="append", default=None)
    parser.add_argument(
        "--tables", type=int, default=20, help="tables in the listing namespace (the full run has 1,000)"
    )
    args = parser.parse_args(argv)
    dataset = Dataset(list_tables=args.tables)
    keys = args.workload or ["load_table_etag"]
    chosen = [w for w in workloads(args.clients) if w.key in keys]
    with LocalPostgres() as pg, contextlib.ExitStack() as stack:
        database_url = pg.create_database("floe_ab")
        postmaster = postmaster_pid(pg.data)
        servers: list[Server] = []
        first: CatalogProcess | None = None
        for index, tree in enumerate(args.trees):
            # PYTHONSAFEPATH: `python -m` would otherwise put the working directory first on the path, and
            # every server would run the tree this command was started in.
            env = {"PYTHONPATH": str(tree.resolve()), "PYTHONSAFEPATH": "1"}
            if first is not None:  # the same admin key and warehouse directory
                env |= {
                    "FLOE_ADMIN_CLIENT_ID": first.admin_client_id,
                    "FLOE_ADMIN_CLIENT_SECRET": first.admin_client_secret,
                }
            home = first.home if first else None
            process = stack.enter_context(
                CatalogProcess(database_url, workers=args.workers, env=env, home=home)
            )
            first = first or process
            assert process.process is not None
            pids = [process.process.pid, *([postmaster] if postmaster else [])]
            target = discover(f"{index}:{tree.resolve().name}", process.url, process.token())
            servers.append(Server(target, str(tree), _pids_of(pids)))
        samplers: list[tuple[str, Callable[[Server, float, float], Sample]]] = []
        if chosen:
            seed(servers[0].target, dataset)
            for server in servers:
                warm_up(server, dataset, chosen, args.server_warmup)
            samplers += [(w.key, _sampler(dataset, w)) for w in chosen]
        if TOKEN_AND_LOAD in keys:
            pairs = _token_and_load(servers, args.clients)
            for server in servers:
                pairs(server, args.server_warmup, 0.0)
            samplers.append((TOKEN_AND_LOAD, pairs))
        for workload_key, run in samplers:
            samples: dict[str, list[Sample]] = {s.target.name: [] for s in servers}
            for round_index in range(args.rounds):
                for server in servers if round_index % 2 == 0 else servers[::-1]:
                    samples[server.target.name].append(run(server, args.duration, args.warmup))
            for server in servers:
                m = combine(samples[server.target.name])
                per_request = m.server_cpu_cores / m.throughput_rps * 1000 if m.throughput_rps else 0.0
                print(
                    f"{workload_key:16} {server.target.name:28} {m.throughput_rps:9,.0f} req/s  "
                    f"CPU {m.server_cpu_cores:.2f} cores = {per_request:.4f} ms/request  "
                    f"other CPU {m.other_cpu_cores:.2f}  p50 {m.p50_ms} p99 {m.p99_ms}  {m.statuses}",
                    flush=True,
                )
    return 0


def _sampler(dataset: Dataset, workload: Workload) -> Callable[[Server, float, float], Sample]:
    return lambda server, duration_s, warmup_s: sample(server, dataset, workload, duration_s, warmup_s)


if __name__ == "__main__":
    raise SystemExit(main())
