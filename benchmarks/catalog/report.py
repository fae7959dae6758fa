"""Result records, the machine and version facts, and the JSON and Markdown outputs."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.catalog.loadgen import LoadResult
from benchmarks.catalog.workloads import SeedInfo, Workload

FLOE = "floe"
REFERENCE = "iceberg-rest"
LABELS = {FLOE: "floe", REFERENCE: "Iceberg reference server"}

# Targets from the issue: reported, never asserted.
THROUGHPUT_RATIO_TARGET = 1.5
P99_TARGET_MS = 20.0


@dataclass
class Measurement:
    """One workload on one server."""

    requests: int
    throughput_rps: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int
    statuses: dict[str, int]
    server_cpu_cores: float
    loadgen_cpu_share: float
    # Cores busy with anything else on the machine meanwhile: high values mean a disturbed run.
    other_cpu_cores: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls, result: LoadResult, server_cpu_s: float, notes: dict[str, Any], other_cpu_s: float = 0.0
    ) -> Measurement:
        return cls(
            requests=result.requests,
            throughput_rps=round(result.throughput, 1),
            p50_ms=_round(result.percentile_ms(50)),
            p99_ms=_round(result.percentile_ms(99)),
            errors=result.errors,
            statuses={str(k): v for k, v in sorted(result.statuses.items())}
            | ({"connection-errors": result.connection_errors} if result.connection_errors else {}),
            server_cpu_cores=round(server_cpu_s / result.wall_s, 2) if result.wall_s else 0.0,
            loadgen_cpu_share=round(result.loadgen_cpu_share, 3),
            other_cpu_cores=round(other_cpu_s / result.wall_s, 2) if result.wall_s else 0.0,
            notes=notes,
        )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


@dataclass
class WorkloadResult:
    key: str
    title: str
    concurrency: int
    results: dict[str, Measurement] = field(default_factory=dict)

    @classmethod
    def of(cls, workload: Workload) -> WorkloadResult:
        return cls(workload.key, workload.title, workload.concurrency)

    @property
    def throughput_ratio(self) -> float | None:
        floe, reference = self.results.get(FLOE), self.results.get(REFERENCE)
        if floe is None or reference is None or not reference.throughput_rps:
            return None
        return round(floe.throughput_rps / reference.throughput_rps, 2)


def machine_info() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": memory_gb,
        "os": f"{platform.system()} {platform.release()}",
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _first_line(command: list[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return None
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else None


def versions(postgres_bin: Path | None, reference_artifacts: dict[str, str]) -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "floe": _package_version("floe"),
        **{
            name: _package_version(name)
            for name in ("litestar", "uvicorn", "uvloop", "sqlalchemy", "asyncpg", "pyiceberg", "httpx")
        },
        "postgresql": _first_line([str(postgres_bin / "postgres"), "--version"]) if postgres_bin else None,
        "java": _first_line(["java", "-version"]),
        **reference_artifacts,
    }


def results_document(
    *,
    settings: dict[str, Any],
    machine: dict[str, Any],
    version_info: dict[str, Any],
    servers: dict[str, str],
    seeds: dict[str, SeedInfo],
    workload_results: list[WorkloadResult],
) -> dict[str, Any]:
    load = next((w for w in workload_results if w.key == "load_table"), None)
    floe_p99 = {w.key: w.results[FLOE].p99_ms for w in workload_results if FLOE in w.results}
    ratio = load.throughput_ratio if load else None
    return {
        "benchmark": "catalog",
        "settings": settings,
        "machine": machine | {"load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "versions": version_info,
        "servers": servers,
        "setup": {name: asdict(info) for name, info in seeds.items()},
        "workloads": [
            asdict(w) | {"floe_vs_reference_throughput": w.throughput_ratio} for w in workload_results
        ],
        "targets": {
            "load_table_throughput_ratio": ratio,
            "load_table_throughput_ratio_target": THROUGHPUT_RATIO_TARGET,
            "load_table_throughput_met": None if ratio is None else ratio >= THROUGHPUT_RATIO_TARGET,
            "floe_p99_ms": floe_p99,
            "floe_p99_target_ms": P99_TARGET_MS,
            "floe_p99_met": {
                key: None if value is None else value <= P99_TARGET_MS for key, value in floe_p99.items()
            },
        },
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def render_markdown(doc: dict[str, Any]) -> str:
    settings, machine, version_info = doc["settings"], doc["machine"], doc["versions"]
    lines = [
        "# Catalog benchmark: floe vs the Apache Iceberg reference REST server",
        "",
        f"Generated by `python -m benchmarks.catalog` on {settings['started_at']}"
        + (f" at git commit `{settings['git_commit']}`" if settings.get("git_commit") else "")
        + ". "
        f"Each server ran all workloads unmeasured for {settings.get('server_warmup_s', 0):g} s first "
        "(JIT warm-up), "
        f"then {settings['duration_s']:g} s measured per workload and server, in "
        f"{settings.get('rounds', 1)} round(s) alternating which server goes first, each after "
        f"{settings['warmup_s']:g} s of warm-up; closed loop (each client sends its next request when "
        "the previous answer is complete), keep-alive HTTP/1.1, no compression. "
        "Latency in milliseconds, measured by the client.",
        "",
        "| Workload | Clients | floe req/s | reference req/s | floe ÷ reference "
        "| floe p50 | floe p99 | reference p50 | reference p99 | floe errors | reference errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in doc["workloads"]:
        floe, ref = w["results"].get(FLOE), w["results"].get(REFERENCE)
        ratio = w["floe_vs_reference_throughput"]
        lines.append(
            f"| {w['title']} | {w['concurrency']} "
            f"| {_fmt(floe and floe['throughput_rps'], 0)} | {_fmt(ref and ref['throughput_rps'], 0)} "
            f"| {'n/a' if ratio is None else f'{ratio:.2f}x'} "
            f"| {_fmt(floe and floe['p50_ms'], 2)} | {_fmt(floe and floe['p99_ms'], 2)} "
            f"| {_fmt(ref and ref['p50_ms'], 2)} | {_fmt(ref and ref['p99_ms'], 2)} "
            f"| {floe['errors'] if floe else 'n/a'} | {ref['errors'] if ref else 'n/a'} |"
        )
    lines += [
        "",
        "Responses by HTTP status; CPU in cores busy on average: the server (floe: workers plus "
        "PostgreSQL; reference: the JVM), and everything else on the machine except the load generator "
        "(other work there disturbs the numbers):",
        "",
        "| Workload | floe statuses | floe CPU | other CPU "
        "| reference statuses | reference CPU | other CPU |",
        "|---|---|---:|---:|---|---:|---:|",
    ]
    for w in doc["workloads"]:
        floe, ref = w["results"].get(FLOE), w["results"].get(REFERENCE)
        lines.append(
            f"| {w['title']} | {_statuses(floe)} | {_fmt(floe and floe['server_cpu_cores'], 2)} "
            f"| {_fmt(floe and floe.get('other_cpu_cores'), 2)} "
            f"| {_statuses(ref)} | {_fmt(ref and ref['server_cpu_cores'], 2)} "
            f"| {_fmt(ref and ref.get('other_cpu_cores'), 2)} |"
        )
    etag = next((w for w in doc["workloads"] if w["key"] == "load_table_etag"), None)
    if etag:
        lines += ["", "ETags (`If-None-Match` on loadTable):", ""]
        for name, m in etag["results"].items():
            notes = m["notes"]
            shown = f"`{notes['etag']}`" if notes.get("etag") else "none"
            lines.append(
                f"- {LABELS.get(name, name)}: ETag {shown}; "
                f"a conditional request is answered {notes.get('conditional_status')}."
            )
    targets = doc["targets"]
    ratio = targets["load_table_throughput_ratio"]
    lines += [
        "",
        "Targets (reported, not asserted):",
        "",
        f"- loadTable throughput floe ÷ reference ≥ {targets['load_table_throughput_ratio_target']:g}x: "
        f"{'n/a' if ratio is None else f'{ratio:.2f}x'} "
        f"({_verdict(targets['load_table_throughput_met'])})",
        f"- floe p99 ≤ {targets['floe_p99_target_ms']:g} ms: "
        + ", ".join(
            f"{key} {_fmt(value, 2)} ms ({_verdict(targets['floe_p99_met'][key])})"
            for key, value in targets["floe_p99_ms"].items()
        ),
        "",
        "Setup (identical on both servers):",
        "",
    ]
    for name, info in doc["setup"].items():
        lines.append(
            f"- {LABELS.get(name, name)}: read table with {info['snapshots']} snapshots, "
            f"metadata {info['metadata_json_bytes']:,} bytes, loadTable response "
            f"{info['load_table_response_bytes']:,} bytes, listTables response "
            f"{info['list_tables_response_bytes']:,} bytes; seeded in {info['seconds']:.1f} s."
        )
    lines += ["", "Servers:", ""]
    lines += [f"- {LABELS.get(name, name)}: {description}" for name, description in doc["servers"].items()]
    loadgen = max(
        (m["loadgen_cpu_share"] for w in doc["workloads"] for m in w["results"].values()), default=0.0
    )
    lines += [
        "",
        f"Machine: {machine['cpus']} CPUs ({machine['cpu_model']}), {machine['memory_gb']} GB RAM, "
        f"{machine['os']}; load average before {machine['load_average_before']}, "
        f"after {machine['load_average_after']}. Servers, PostgreSQL and the load generator share the "
        f"machine; the generator used at most {loadgen:.0%} of one core.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in version_info.items() if v),
        "",
    ]
    return "\n".join(lines)


def _statuses(m: dict[str, Any] | None) -> str:
    return "n/a" if not m else ", ".join(f"{k}: {v:,}" for k, v in m["statuses"].items())


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("met" if met else "missed")


def write_results(doc: dict[str, Any], directory: Path, name: str = "catalog") -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / f"{name}.json", directory / f"{name}.md"
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    md_path.write_text(render_markdown(doc))
    return json_path, md_path
