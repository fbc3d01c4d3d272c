"""Metrics job speed (design.md §11): the Spark job on local[2] over archives of 1 M and 4 M
records, side by side with Spark's floor (a bare read-and-count of the same files with the same
explicit schema) and the same metrics in DuckDB (what a single-machine user would pick).

    .venv/bin/python benchmarks/metrics_job.py [--sizes 1m]

``--sizes`` measures only some archive sizes (while iterating) and writes no result file.
``--breakdown`` instead times the job's first Spark job stage by stage on the 1 M archive (see
``_breakdown_worker``) and writes ``benchmarks/results/metrics_job_breakdown.json``.
Archives are generated once (deterministic seed) into ``benchmarks/.data/`` and reused. Each Spark
measurement runs in its own process (so peak memory is its own), after a warm-up on a tiny archive;
JVM start-up is outside the timings of both the job and the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._result import print_table, write_result  # noqa: E402
from chalicelib.core import archive  # noqa: E402

DATA = ROOT / "benchmarks" / ".data"
SEED = 20240501
RECORDS_PER_HOUR = 1_000_000 // 24
LINES_PER_FILE = 50_000
START = datetime(2024, 5, 1, tzinfo=UTC)
SIZES = {"1m": 1_000_000, "4m": 4_000_000}
WARM_RECORDS = 20_000


# ---------------------------------------------------------------------------------------- data


class _Writer:
    """Lines bucketed by the hour prefix they are filed under, flushed in files of at most
    LINES_PER_FILE lines once an hour can no longer receive records."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.buckets: dict[datetime, list[bytes]] = {}
        self.files = 0
        self.lines = 0

    def add(self, hour: datetime, line: bytes) -> None:
        self.buckets.setdefault(hour, []).append(line)
        self.lines += 1

    def flush_before(self, hour: datetime | None) -> None:
        for h in sorted(self.buckets):
            if hour is not None and h >= hour:
                continue
            lines = self.buckets.pop(h)
            for n in range(0, len(lines), LINES_PER_FILE):
                name = f"broker-archive-1-{h:%Y-%m-%d-%H}-{n // LINES_PER_FILE:04d}"
                path = self.root / archive.archive_key(h, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"".join(lines[n : n + LINES_PER_FILE]))
                self.files += 1


def generate(target: Path, records: int, seed: int = SEED) -> dict[str, Any]:
    """About ``records`` archive lines: ~5 % rejections, the rest accepted events and their
    delivery attempts (retries, dead letters, replies), plus 0.3 % duplicate lines, 0.05 %
    malformed lines and 1 % late records (filed under the next hour)."""
    rng = random.Random(seed)
    brokers = [(f"team-{n}", b) for n in range(3) for b in ("default", "orders")]
    triggers = {nb: [f"t-{k}" for k in range(4)] for nb in brokers}
    fail = {(nb, t): rng.choice((0.0, 0.02, 0.1, 0.3)) for nb in brokers for t in triggers[nb]}
    types = [f"com.example.{d}.{v}" for d in ("order", "user", "cart", "ship") for v in range(5)]
    sources = [f"/svc/{k}" for k in range(50)]
    reasons = [
        ("invalid_event", 400),
        ("unknown_broker", 404),
        ("too_large", 413),
        ("unavailable", 503),
    ]
    out = _Writer(target)
    hours = max(1, round(records / RECORDS_PER_HOUR))
    per_hour = records / hours

    def emit(record: dict[str, Any]) -> None:
        at = datetime.fromisoformat(record["at"].replace("Z", "+00:00"))
        hour = at.replace(minute=0, second=0, microsecond=0)
        if rng.random() < 0.01:
            hour += timedelta(hours=1)  # late: Firehose filed it under the next hour
        line = archive.encode_line(record)
        out.add(hour, line)
        if rng.random() < 0.003:
            out.add(hour, line)

    for h in range(hours):
        hour_start = START + timedelta(hours=h)
        goal = (h + 1) * per_hour
        while out.lines < goal:
            at = hour_start + timedelta(milliseconds=rng.randrange(3_600_000))
            ns, broker = rng.choice(brokers)
            if rng.random() < 0.05:
                reason, status = rng.choice(reasons)
                emit(archive.rejected_record(ns, broker, status, reason, "refused", at))
                continue
            if rng.random() < 0.0005:
                out.add(hour_start, b'{"v":1,"kind":"accepted","at":\n')
                continue
            etype, source = rng.choice(types), rng.choice(sources)
            eid = f"{rng.getrandbits(64):016x}"
            arrival = archive.rfc3339(at)
            matched = rng.sample(triggers[(ns, broker)], rng.choice((0, 1, 1, 2, 3)))
            event = {
                "specversion": "1.0",
                "id": eid,
                "source": source,
                "type": etype,
                "datacontenttype": "application/json",
                "knativearrivaltime": arrival,
                "data": {"order": eid[:8], "amount": rng.randrange(10_000), "note": "x" * 40},
            }
            emit(archive.accepted_record(ns, broker, event, matched, 180, at))
            for trig in matched:
                t = at
                for attempt in range(1, 5):
                    latency = rng.expovariate(1 / 40.0)
                    t = t + timedelta(milliseconds=latency + (attempt - 1) * 200)
                    failed = rng.random() < fail[((ns, broker), trig)]
                    if not failed:
                        outcome = "reply" if rng.random() < 0.1 else "delivered"
                        status = 200
                    else:
                        outcome = "dead_lettered" if attempt == 4 else "retry"
                        status = rng.choice((500, 503, None))
                    emit(
                        archive.delivery_record(
                            ns, broker, trig, eid, etype, source, arrival, attempt, status,
                            outcome, latency, t,
                        )
                    )  # fmt: skip
                    if not failed:
                        break
        out.flush_before(hour_start)
    out.flush_before(None)
    return {"lines": out.lines, "files": out.files, "hours": hours}


def ensure_archive(name: str) -> Path:
    target = DATA / name
    done = target / "_GENERATED.json"  # leading "_": Spark skips it
    if done.exists():
        return target
    started = time.monotonic()
    info = generate(target, SIZES.get(name, WARM_RECORDS))
    info["seconds"] = round(time.monotonic() - started, 1)
    done.write_text(json.dumps(info))
    print(f"generated {name}: {info}")
    return target


# ------------------------------------------------------------------------------------- workers


def _spark_worker(mode: str, path: str, out: str, repeat: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from spark_glue import local, pipeline

    spark = local.session()

    def floor() -> None:
        # The same files, the same explicit schema, every column parsed: a plain count() would
        # let Spark skip parsing altogether (it only counts lines), measured as `line_count`.
        raw = pipeline.read_archive(spark, [path])
        raw.select(*(F.count(c) for c in raw.columns if c != "path")).collect()

    def line_count() -> None:
        pipeline.read_archive(spark, [path]).count()

    def job() -> None:
        result = pipeline.compute(pipeline.read_archive(spark, [path]))
        pipeline.write(result, out)
        result.release()
        pipeline.write_local_summary(result.summary, Path(out))

    work = {"floor": floor, "job": job, "line_count": line_count}[mode]
    warm = str(ensure_archive("warm"))
    path, real = warm, path
    work()  # JIT and class loading, on a small archive
    path = real
    seconds = []
    for _ in range(repeat):
        started = time.monotonic()
        work()
        seconds.append(time.monotonic() - started)
    return {"seconds": seconds}


# What the job's first Spark job does, one step more per stage, each run to a no-op sink (every
# column computed, nothing written), so the cost of a step is the difference to the stage before.
BREAKDOWN_STAGES = (
    ("read", "read, every column parsed (the floor, to a no-op sink)"),
    ("exact_dedup", "read the record-key columns, exact dropDuplicates, count"),
    ("normalize", "read, join each file's hour, normalize (timestamps, malformed, late)"),
    ("shuffle", "+ the line shuffle by cell (the lines' key and kept values; no aggregate)"),
    ("deduplicate", "+ the dedup aggregate (Spark 3.5 plans it partial + final)"),
    ("grain", "+ the grain aggregate"),
    ("grain_cached", "+ partition by broker, checkpoint (the job's first Spark job)"),
    ("job", "the whole job (tables, summary, writes)"),
)


def _breakdown_worker(path: str, out: str, rounds: int) -> dict[str, Any]:
    """Each stage of ``BREAKDOWN_STAGES``, interleaved round by round (so JIT warm-up and machine
    noise spread over all of them), after one warm-up round on the same archive; best per stage."""
    from pyspark.sql import functions as F

    from spark_glue import local, pipeline, transforms

    spark = local.session()

    def plain() -> Any:
        return pipeline.read_archive(spark, [path])

    def noop(df: Any) -> None:
        df.write.format("noop").mode("overwrite").save()

    def normalized() -> Any:
        return transforms.normalize(pipeline.with_filed_hours(plain()))

    def exact_dedup() -> None:
        event = {"id": "event_id", "source": "event_source", "type": "event_type"}
        key = [
            *(F.col(c) for c in ("kind", "namespace", "broker", "trigger", "attempt", "reason")),
            *(F.coalesce(f"event.{k}", v).alias(k) for k, v in event.items()),
        ]
        plain().select(*key).dropDuplicates().count()

    def grain_cached() -> None:
        pipeline.release_grain(pipeline.cached_grain(pipeline.records(plain())))

    def job() -> None:
        result = pipeline.compute(plain())
        pipeline.write(result, out)
        result.release()

    stages = {
        "read": lambda: noop(plain()),
        "exact_dedup": exact_dedup,
        "normalize": lambda: noop(normalized()),
        "shuffle": lambda: noop(transforms.by_cell(normalized())),
        "deduplicate": lambda: noop(pipeline.records(plain())),
        "grain": lambda: noop(transforms.grain(pipeline.records(plain()))),
        "grain_cached": grain_cached,
        "job": job,
    }
    seconds: dict[str, list[float]] = {name: [] for name in stages}
    for n in range(rounds + 1):
        for name, work in stages.items():
            started = time.monotonic()
            work()
            if n:  # round 0 warms the JIT on this archive
                seconds[name].append(time.monotonic() - started)
        print(f"round {n}", file=sys.stderr, flush=True)
    return {"seconds": seconds}


def breakdown(rounds: int) -> None:
    archive_dir = ensure_archive("1m")
    out = DATA / "out" / "breakdown-1m"
    cmd = [sys.executable, __file__, "--worker", "breakdown", str(archive_dir), str(out)]
    done = subprocess.run([*cmd, str(rounds)], check=True, stdout=subprocess.PIPE, text=True)
    seconds = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
    best = {name: min(times) for name, times in seconds.items()}
    read = best["read"]
    rows, previous = [], None
    for name, what in BREAKDOWN_STAGES:
        step = "" if previous is None or name == "exact_dedup" else f"{best[name] - previous:+.2f}"
        rows.append((name, f"{best[name]:.2f}", step, f"{best[name] / read:.2f}", what))
        if name != "exact_dedup":
            previous = best[name]
    print_table(rows, ("stage", "best s", "step s", "x read", "what"))
    write_result(
        "metrics_job_breakdown",
        {f"{name}_over_read": best[name] / read for name, _ in BREAKDOWN_STAGES},
        f"local[2], 1M archive, best of {rounds} interleaved rounds after a warm-up round on the "
        "same archive; stages run to a no-op sink; the step of a stage is its time minus the "
        "stage before (exact_dedup stands apart: a lower bound for any exact deduplication)",
        seconds={name: round(t, 3) for name, t in best.items()},
        stages=dict(BREAKDOWN_STAGES),
    )


DUCKDB_COLUMNS = {
    "v": "INTEGER", "kind": "VARCHAR", "at": "VARCHAR", "namespace": "VARCHAR",
    "broker": "VARCHAR",
    "event": "STRUCT(specversion VARCHAR, id VARCHAR, source VARCHAR, type VARCHAR, "
             "datacontenttype VARCHAR, knativearrivaltime VARCHAR)",
    "triggers": "VARCHAR[]", "size": "BIGINT", "status": "INTEGER", "reason": "VARCHAR",
    "detail": "VARCHAR", "event_type": "VARCHAR", "event_source": "VARCHAR",
    "trigger": "VARCHAR", "event_id": "VARCHAR", "arrival": "VARCHAR", "attempt": "INTEGER",
    "outcome": "VARCHAR", "latency_ms": "DOUBLE",
}  # fmt: skip

DUCKDB_SQL = """
CREATE TEMP TABLE clean AS
WITH src AS (
  SELECT * FROM read_json('{glob}', format = 'newline_delimited', ignore_errors = true,
                          columns = {columns})
), norm AS (
  SELECT kind, namespace, broker, TRY_CAST("at" AS TIMESTAMPTZ) AS ts,
         CASE WHEN kind = 'accepted' THEN event.id ELSE event_id END AS event_id,
         CASE WHEN kind = 'accepted' THEN event.type ELSE event_type END AS event_type,
         CASE WHEN kind = 'accepted' THEN event.source ELSE event_source END AS event_source,
         trigger, attempt, status, reason, outcome, latency_ms, size,
         len(triggers) AS matched_triggers,
         epoch_ms(TRY_CAST("at" AS TIMESTAMPTZ)) - epoch_ms(TRY_CAST(arrival AS TIMESTAMPTZ))
           AS e2e_ms
  FROM src
  WHERE v = 1 AND kind IN ('accepted', 'rejected', 'delivery') AND "at" IS NOT NULL
    AND namespace IS NOT NULL AND broker IS NOT NULL
)
SELECT kind, namespace, broker, event_type, event_source, trigger, attempt, reason,
       min(ts) AS ts, arg_min(status, ts) AS status, arg_min(outcome, ts) AS outcome,
       arg_min(latency_ms, ts) AS latency_ms, arg_min(e2e_ms, ts) AS e2e_ms,
       arg_min(size, ts) AS size, arg_min(matched_triggers, ts) AS matched_triggers,
       count(*) AS copies
FROM norm WHERE kind <> 'rejected'
GROUP BY kind, namespace, broker, event_id, event_source, event_type, trigger, attempt, reason
UNION ALL
SELECT kind, namespace, broker, event_type, event_source, trigger, attempt, reason, ts, status,
       outcome, latency_ms, e2e_ms, size, matched_triggers, 1
FROM norm WHERE kind = 'rejected';

COPY (
  SELECT namespace, broker, date_trunc('hour', ts) AS hour, CAST(ts AS DATE) AS date,
         count(*) FILTER (kind = 'accepted') AS accepted,
         count(*) FILTER (kind = 'rejected') AS rejected,
         count(*) FILTER (kind = 'accepted' AND matched_triggers > 0) AS matched,
         count(*) FILTER (kind = 'accepted' AND matched_triggers = 0) AS no_match,
         sum(matched_triggers) AS trigger_matches, sum(size) AS accepted_bytes
  FROM clean WHERE kind <> 'delivery' GROUP BY ALL
) TO '{out}/broker_hourly' (FORMAT parquet, PARTITION_BY (date), OVERWRITE_OR_IGNORE);
COPY (
  SELECT namespace, broker, date_trunc('hour', ts) AS hour, reason, status,
         CAST(ts AS DATE) AS date, count(*) AS rejected
  FROM clean WHERE kind = 'rejected' GROUP BY ALL
) TO '{out}/broker_rejections' (FORMAT parquet, PARTITION_BY (date), OVERWRITE_OR_IGNORE);
COPY (
  SELECT namespace, broker, date_trunc('hour', ts) AS hour, event_type, event_source,
         CAST(ts AS DATE) AS date, count(*) AS events
  FROM clean WHERE kind = 'accepted' GROUP BY ALL
) TO '{out}/broker_event_types' (FORMAT parquet, PARTITION_BY (date), OVERWRITE_OR_IGNORE);
COPY (
  SELECT namespace, broker, event_type, event_source, CAST(ts AS DATE) AS date,
         min(ts) AS first_seen, max(ts) AS last_seen, count(*) AS events
  FROM clean WHERE kind = 'accepted' GROUP BY ALL
) TO '{out}/event_types' (FORMAT parquet, PARTITION_BY (date), OVERWRITE_OR_IGNORE);
COPY (
  SELECT namespace, broker, trigger, date_trunc('hour', ts) AS hour, CAST(ts AS DATE) AS date,
         count(*) AS attempts,
         count(*) FILTER (outcome IN ('delivered', 'reply')) AS delivered,
         count(*) FILTER (outcome = 'reply') AS replies,
         count(*) FILTER (outcome = 'retry') AS retries,
         count(*) FILTER (outcome = 'dead_lettered') AS dead_lettered,
         count(*) FILTER (status IS NULL) AS transport_errors,
         quantile_cont(e2e_ms, [0.5, 0.95, 0.99]) FILTER (outcome IN ('delivered', 'reply'))
           AS latency_ms, avg(latency_ms) AS attempt_ms_avg
  FROM clean WHERE kind = 'delivery' GROUP BY ALL
) TO '{out}/trigger_hourly' (FORMAT parquet, PARTITION_BY (date), OVERWRITE_OR_IGNORE);
"""

DUCKDB_SUMMARY = """
SELECT count(*) FILTER (kind = 'accepted'), count(*) FILTER (kind = 'rejected'),
       count(*) FILTER (kind = 'delivery' AND outcome IN ('delivered', 'reply')),
       count(*) FILTER (kind = 'delivery' AND outcome = 'dead_lettered'),
       quantile_cont(e2e_ms, [0.5, 0.95, 0.99])
         FILTER (kind = 'delivery' AND outcome IN ('delivered', 'reply'))
FROM clean
"""


def _duckdb_worker(path: str, out: str, repeat: int) -> dict[str, Any]:
    import shutil

    import duckdb

    seconds, figures = [], None
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        Path(out).mkdir(parents=True)
        con = duckdb.connect()
        con.execute("SET threads = 2; SET TimeZone = 'UTC'")
        columns = "{" + ", ".join(f"'{k}': '{v}'" for k, v in DUCKDB_COLUMNS.items()) + "}"
        sql = DUCKDB_SQL.format(glob=f"{path}/archive/*/*/*/*/*", columns=columns, out=out)
        started = time.monotonic()
        con.execute(sql)
        figures = con.execute(DUCKDB_SUMMARY).fetchone()
        seconds.append(time.monotonic() - started)
        con.close()
    assert figures is not None
    return {"seconds": seconds, "figures": [*figures[:4], *figures[4]]}


# ---------------------------------------------------------------------------------- the runner


def _rss_tree(pid: int) -> int:
    """Resident bytes of a process and its descendants that are Python or Java (the driver and
    its JVM). Other descendants are left out: a helper the JVM forks (Hadoop's local file system
    runs ``chmod`` when it has no native library) reports the JVM's pages as its own until it
    execs, which once counted the JVM twice (a peak of 6.9 GB for a 2.4 GB run)."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                status = dict(line.split(":", 1) for line in fh if ":" in line)
            if p == pid or status["Name"].strip().startswith(("python", "java")):
                total += int(status["VmRSS"].split()[0]) * 1024
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    stack += [int(c) for c in fh.read().split()]
        except (FileNotFoundError, ProcessLookupError, KeyError):
            continue
    return total


def measure(mode: str, archive_dir: Path, repeat: int) -> dict[str, Any]:
    """Run one worker process; its best time of ``repeat`` and its peak resident memory."""
    out = DATA / "out" / f"{mode}-{archive_dir.name}"
    cmd = [sys.executable, __file__, "--worker", mode, str(archive_dir), str(out), str(repeat)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak, done = 0, threading.Event()

    def poll() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_tree(proc.pid))
            time.sleep(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    stdout, _ = proc.communicate()
    done.set()
    poller.join()
    if proc.returncode:
        raise RuntimeError(f"{mode} on {archive_dir} failed ({proc.returncode})")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["best"] = min(result["seconds"])
    result["peak_mb"] = peak / 2**20
    return result


def _headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures to compare with DuckDB's: accepted, rejected, delivered, dead-lettered, p50,
    p95, p99 (and what only the Spark job counts: malformed lines, duplicates)."""
    d = summary["delivery"]
    return {
        "accepted": summary["ingress"]["accepted"],
        "rejected": summary["ingress"]["rejected"],
        "delivered": d["delivered"],
        "dead_lettered": d["dead_lettered"],
        "latency_ms": [d["latency_p50_ms"], d["latency_p95_ms"], d["latency_p99_ms"]],
        "malformed": summary["input"]["malformed"],
        "duplicates": summary["input"]["duplicates"],
    }


def main(sizes: list[str]) -> None:
    archives = {name: ensure_archive(name) for name in sizes}
    lines = {
        n: json.loads((p / "_GENERATED.json").read_text())["lines"] for n, p in archives.items()
    }
    repeat = int(os.environ.get("BENCH_REPEAT", "2"))
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for name in sizes:
        for mode in ("line_count", "floor", "job", "duckdb"):
            if name == "4m" and mode in ("line_count", "duckdb"):
                continue
            runs[(mode, name)] = measure(mode, archives[name], repeat)
            r = runs[(mode, name)]
            print(
                f"  {mode:<10} {name}: {r['best']:7.2f} s   peak {r['peak_mb']:6.0f} MB", flush=True
            )
    print_table(
        [
            (f"{mode} {name}", f"{r['best']:.2f}", f"{lines[name] / r['best']:,.0f}",
             f"{r['peak_mb']:.0f}")
            for (mode, name), r in runs.items()
        ],
        ("run", "best s", "lines/s", "peak MB"),
    )  # fmt: skip
    for name in sizes:
        ratio = runs[("job", name)]["best"] / runs[("floor", name)]["best"]
        print(f"job / floor {name}: {ratio:.2f}")
    spark_summary = (
        _headline(json.loads((DATA / "out" / "job-1m" / "summary.json").read_text()))
        if (DATA / "out" / "job-1m" / "summary.json").exists()
        else None
    )
    print(f"spark figures 1m: {json.dumps(spark_summary)}")
    if sizes != list(SIZES):
        return
    job1, job4 = runs[("job", "1m")]["best"], runs[("job", "4m")]["best"]
    figures = {
        "records_per_s_1m": lines["1m"] / job1,
        "time_vs_spark_floor_1m": job1 / runs[("floor", "1m")]["best"],
        "time_4m_over_1m": job4 / job1,
        "time_vs_duckdb_1m": job1 / runs[("duckdb", "1m")]["best"],
    }
    write_result(
        "metrics_job",
        figures,
        "local[2], best of "
        f"{repeat}; JVM start-up excluded; floor = read with the explicit schema + count of every "
        "column (a bare count() skips parsing: line_count); DuckDB 2 threads, same tables, no "
        "malformed-by-reason, no dense hours",
        seconds={f"{m}_{n}": round(r["best"], 3) for (m, n), r in runs.items()},
        peak_mb={f"{m}_{n}": round(r["peak_mb"]) for (m, n), r in runs.items()},
        lines=lines,
        duckdb_figures_1m=runs[("duckdb", "1m")].get("figures"),
        spark_figures_1m=spark_summary,
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        mode, path, out, repeat = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
        if mode == "duckdb":
            print(json.dumps(_duckdb_worker(path, out, repeat)))
        elif mode == "breakdown":
            print(json.dumps(_breakdown_worker(path, out, repeat)))
        else:
            print(json.dumps(_spark_worker(mode, path, out, repeat)))
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        parser.add_argument("--sizes", default=",".join(SIZES), help="e.g. 1m (comma-separated)")
        parser.add_argument(
            "--breakdown", action="store_true", help="time the job stage by stage (1m only)"
        )
        parser.add_argument("--rounds", type=int, default=3, help="rounds of --breakdown")
        args = parser.parse_args()
        if args.breakdown:
            breakdown(args.rounds)
            sys.exit(0)
        chosen = args.sizes.split(",")
        if unknown := set(chosen) - set(SIZES):
            parser.error(f"unknown sizes: {sorted(unknown)}")
        main([name for name in SIZES if name in chosen])
