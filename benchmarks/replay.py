"""Replay throughput on local mode: events per second from the S3 archive to a trigger's queue,
side by side with the floor, reading the same archive objects alone (list, get, parse, select).

Both run against the local runtime's embedded AWS endpoint (moto in its own process, as
``brokerctl dev`` starts it) with the broker's own wiring (Container, bootstrap). The archive is
written as Firehose writes it: hour-keyed JSON-lines objects of ``accepted`` records. A replay
runs in one bounded run, reading the objects, sending SendMessageBatch calls of 10 messages to
the trigger's queue and checkpointing in DynamoDB after each replay batch
(``RunnerOptions.batch_events``, 1,000 events, across archive objects: what the docs promise, a
crash re-sends at most 1,000 events), ``RunnerOptions.send_concurrency`` (4) calls in flight, the
next batch read while they are; a standard queue's events travel in packs (fifty 1 KiB
events a message). The calls are made by threads of the replaying process (the default) or by
``RunnerOptions.send_processes`` sender processes (adapters/sqs_send_pool.py), timed WARM (the
process started before the clock starts, as in a running local runtime or a warm Lambda
container) and COLD (its start inside the timed run); the former default (one event a message,
checkpoint every 100), 2 processes, and the local SQS endpoint alone with the same bytes are
timed too, side by side; and the CPU each process spends (this one, the senders, moto) on the
read, the send alone and the replays. The figure (``replay_ratio_vs_read``) comes from the floor
and the default replay timed in turn, with nothing else between them, after an untimed replay
(a process's first replay run ends with its heap frozen out of full garbage collections:
chalicelib/heap.py); the other configurations follow in rounds of their own.
Run: .venv/bin/python benchmarks/replay.py (REPLAY_EVENTS=20000 for a longer replay)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._result import print_table, write_result  # noqa: E402
from brokerctl.embedded_aws import EmbeddedAws, free_port  # noqa: E402
from chalicelib.config import Settings  # noqa: E402
from chalicelib.container import Container  # noqa: E402
from chalicelib.core import archive, archive_reader, names  # noqa: E402
from chalicelib.core.clock import rfc3339  # noqa: E402
from chalicelib.core.cloudevents.sqs_message import PACK_MAX_BYTES, PACK_MAX_EVENTS  # noqa: E402
from chalicelib.services.replays import BATCH_EVENTS, SEND_CONCURRENCY  # noqa: E402

EVENTS = int(os.environ.get("REPLAY_EVENTS", "5000"))
PER_OBJECT = 500  # records per archive object (Firehose: whatever its buffer held)
ROUNDS = int(os.environ.get("REPLAY_ROUNDS", "5"))
# (batch_events, send_concurrency, packs, send_processes): the former default (one event a
# message), packs sent by threads of the replaying process (the default), by 1 and 2 sender
# processes, and 2 processes with 8 calls in flight.
CONFIGS = (
    (100, 4, False, 0),
    (1000, 4, True, 0),
    (1000, 4, True, 1),
    (1000, 4, True, 2),
    (1000, 8, True, 2),
)
FORMER = (100, 4, False, 0)
THREADS = (1000, 4, True, 0)
POOL = (1000, 4, True, 1)
COLD = (0, 0, False, -1)  # POOL with its process started inside the timed run


def _archive(c: Container, start: datetime) -> list[str]:
    """``EVENTS`` accepted records of 1 KiB events, under the hour of ``start``."""
    keys = []
    data = "x" * 1024
    for first in range(0, EVENTS, PER_OBJECT):
        lines = []
        for i in range(first, min(EVENTS, first + PER_OBJECT)):
            at = start + timedelta(milliseconds=i)
            event = {
                "specversion": "1.0",
                "id": f"e{i}",
                "source": "/bench",
                "type": "bench",
                "datacontenttype": "text/plain",
                "knativearrivaltime": archive.rfc3339(at),
                "data": data,
            }
            record = archive.accepted_record("bench", "default", event, ["t"], 1100, at)
            lines.append(archive.encode_line(record))
        key = archive.archive_key(
            start, f"bench-archive-1-{start:%Y-%m-%d-%H-%M-%S}-{first:08d}-{uuid.uuid4()}"
        )
        c.blobs.put(c.settings.archive_bucket, key, b"".join(lines))
        keys.append(key)
    return keys


def _read_floor(c: Container, start: datetime, end: datetime) -> float:
    """Seconds to list, get, parse and select every record, as the runner reads them."""
    bucket = c.settings.archive_bucket
    lo, hi = archive.rfc3339(start), archive.rfc3339(end)
    began = time.perf_counter()
    keys = c.blob_listing.list_keys(
        bucket, "archive/", archive_reader.first_key_bound("archive/", start), 1000
    )
    found = 0
    for key in keys:
        for record in archive_reader.object_records(key, c.blobs.get(bucket, key)).records:
            if record is not None and archive_reader.selected(record, "bench", "default", lo, hi):
                found += 1
    elapsed = time.perf_counter() - began
    assert found == EVENTS, found
    return elapsed


def _send_floor(c: Container, queue: str, per_message: int = 1) -> float:
    """Seconds to send ``EVENTS`` events of the same size in SendMessageBatch calls of 10
    messages of ``per_message`` events each, one call at a time with nothing else: what the
    local SQS endpoint costs by itself."""
    from chalicelib.ports import OutgoingMessage

    body = "x" * 1200 * per_message  # about the size of queued 1 KiB events
    messages = -(-EVENTS // per_message)

    def send(first: int) -> None:
        batch = [OutgoingMessage(str(i), body) for i in range(min(10, messages - first))]
        assert c.queues.send_batch(queue, batch) == []

    began = time.perf_counter()
    for first in range(0, messages, 10):
        send(first)
    return time.perf_counter() - began


def _replay(
    c: Container,
    start: datetime,
    end: datetime,
    batch: int,
    concurrency: int,
    packs: bool,
    processes: int,
    warm: bool = True,
    probe: _Probe | None = None,
) -> float:
    """Seconds for one run of a new replay of the range; with ``processes``, the sender pool
    is started before the clock starts (``warm``) or made anew within the timed run."""
    name = f"r{uuid.uuid4().hex[:8]}"
    body = {"spec": {"from": rfc3339(start), "to": rfc3339(end), "triggers": ["t"]}}
    c.replays.put("bench", "default", name, body)
    runner = c.replay_runner
    runner._options = replace(
        runner._options,
        batch_events=batch,
        send_concurrency=concurrency,
        packs=packs,
        send_processes=processes,
        settle_seconds=0.0,
    )
    if processes:
        if not warm:
            c.stop_replay_sends()
            c._send_pool = None
        else:
            c._replay_process_send(processes)
            c._send_pool.start()
    if probe is not None:
        probe.begin()
    began = time.perf_counter()
    assert runner.run("bench", "default", name, 3600.0)
    elapsed = time.perf_counter() - began
    if probe is not None:
        probe.end()
    progress = c.replays.get("bench", "default", name)["status"]["progress"]
    assert progress["eventsEnqueued"] == EVENTS, progress
    return elapsed


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) a process has used, from /proc (in clock ticks)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Probe:
    """Wall and CPU time per process (this one with all its threads, the sender processes,
    moto's) over the spans between ``begin`` and ``end``; ``means`` in ms per span."""

    def __init__(self, c: Container, moto_pid: int | None) -> None:
        self._c, self._moto = c, moto_pid
        self._totals = {"wall": 0.0, "replaying_cpu": 0.0, "senders_cpu": 0.0, "moto_cpu": 0.0}
        self._spans = 0
        self._senders: list[int | None] = []
        self._before = (0.0, 0.0, 0.0, 0.0)

    def begin(self) -> None:
        pool = self._c._send_pool
        self._senders = pool.pids() if pool is not None and not pool._stopped else []
        self._before = (
            time.perf_counter(),
            time.process_time(),
            sum(map(_cpu_s, self._senders)),
            _cpu_s(self._moto),
        )

    def end(self) -> None:
        now = (
            time.perf_counter(),
            time.process_time(),
            sum(map(_cpu_s, self._senders)),
            _cpu_s(self._moto),
        )
        for key, b, a in zip(self._totals, self._before, now, strict=True):
            self._totals[key] += a - b
        self._spans += 1

    def means(self) -> dict[str, float]:
        return {f"{k}_ms": v * 1000 / self._spans for k, v in self._totals.items()}


def _where(
    c: Container, moto_pid: int | None, run: Callable[[_Probe | None], object]
) -> dict[str, float]:
    """``_Probe.means`` of ``ROUNDS`` runs of ``run``."""
    probe = _Probe(c, moto_pid)
    for _ in range(ROUNDS):
        run(probe)
    return probe.means()


def _whole(work: Callable[[], object]) -> Callable[[_Probe | None], object]:
    def run(probe: _Probe | None) -> None:
        assert probe is not None
        probe.begin()
        work()
        probe.end()

    return run


def main() -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    load = os.getloadavg()
    aws = EmbeddedAws("127.0.0.1", free_port())
    endpoint = aws.start()
    settings = replace(Settings(), endpoint_url=endpoint, cache_ttl_seconds=0.0)
    c = Container(settings)
    try:
        from brokerctl.bootstrap import bootstrap

        bootstrap(settings, c.clients, say=lambda line: None)
        c.brokers.put("bench", "default", {"metadata": {"name": "default"}})
        trigger = {"spec": {"broker": "default", "subscriber": {"uri": "http://127.0.0.1:9/"}}}
        c.triggers.put("bench", "t", trigger)
        start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
        end = start + timedelta(minutes=30)
        _archive(c, start)
        queue = names.queue_name(settings.queue_prefix, "bench", "default", "t")
        default = (BATCH_EVENTS, SEND_CONCURRENCY, True, settings.replay_send_processes)
        assert default in CONFIGS, default
        reads: list[float] = []
        sends_packed: list[float] = []
        colds: list[float] = []
        replays: dict[tuple[int, int, bool, int], list[float]] = {k: [] for k in CONFIGS}
        per_pack = min(PACK_MAX_EVENTS, (PACK_MAX_BYTES - 200) // 1200)  # 1 KiB events a pack holds
        # The figure: the floor and the default replay in turn, nothing else between them (the
        # other configurations leave the embedded endpoint busier: the former default's 5,000
        # messages a run, a cold sender process starting), twice as many rounds.
        _replay(c, start, end, *default)
        for _ in range(2 * ROUNDS):
            reads.append(_read_floor(c, start, end))
            replays[default].append(_replay(c, start, end, *default))
        # The default once more among the others, to compare them in the same conditions.
        among: list[float] = []
        reads_among: list[float] = []  # the floor again: the ratios of these rounds use it
        packed = [k for k in CONFIGS if k != FORMER] + [COLD]
        for r in range(ROUNDS):
            reads_among.append(_read_floor(c, start, end))
            sends_packed.append(_send_floor(c, queue, per_message=per_pack))
            replays[FORMER].append(_replay(c, start, end, *FORMER))
            # Whatever runs just after the former default is slower (seen: a third): an untimed
            # replay, then the others in an order that turns each round.
            _replay(c, start, end, *THREADS)
            for config in packed[r % len(packed) :] + packed[: r % len(packed)]:
                if config == COLD:
                    colds.append(_replay(c, start, end, *POOL, warm=False))
                elif config == default:
                    among.append(_replay(c, start, end, *config))
                else:
                    replays[config].append(_replay(c, start, end, *config))
        # Where the time goes (CPU per process; /proc counts in 10 ms ticks: a mean of ROUNDS).
        moto_pid = aws._process.pid if aws._process is not None else None
        where = {
            "read": _where(c, moto_pid, _whole(lambda: _read_floor(c, start, end))),
            "send_alone_packed": _where(
                c, moto_pid, _whole(lambda: _send_floor(c, queue, per_message=per_pack))
            ),
            "replay_threads": _where(
                c, moto_pid, lambda probe: _replay(c, start, end, *THREADS, probe=probe)
            ),
            "replay_1_process_warm": _where(
                c, moto_pid, lambda probe: _replay(c, start, end, *POOL, probe=probe)
            ),
        }
        c.stop_replay_sends()
        read_s = statistics.median(reads)
        send_p_eps = EVENTS / statistics.median(sends_packed)
        cold_eps = EVENTS / statistics.median(colds)
        replay_s = {k: statistics.median(v) for k, v in replays.items()}
        read_eps = EVENTS / read_s
        read_among_eps = EVENTS / statistics.median(reads_among)
        among_eps = EVENTS / statistics.median(among)
        eps = {k: EVENTS / s for k, s in replay_s.items()}
        rows = [
            ("read archive objects alone (floor)", f"{read_s * 1000:,.0f}", f"{read_eps:,.0f}"),
            (
                f"SendMessageBatch x10 alone, {per_pack} events a message",
                f"{EVENTS / send_p_eps * 1000:,.0f}",
                f"{send_p_eps:,.0f}",
            ),
        ]
        for config in CONFIGS:
            b, n, is_packed, p = config
            label = f"replay, {'packs' if is_packed else 'one event a message'}, checkpoint every "
            label += f"{b} events, {n} calls in flight, "
            label += f"{p} sender processes (warm)" if p else "threads"
            if config == default:
                label += " (default)"
            elif config == FORMER:
                label += " (former default)"
            rows.append((label, f"{replay_s[config] * 1000:,.0f}", f"{eps[config]:,.0f}"))
            if config == default:
                among_s = statistics.median(among)
                rows.append(
                    (
                        "  the default again, among the other configurations",
                        f"{among_s * 1000:,.0f}",
                        f"{EVENTS / among_s:,.0f}",
                    )
                )
        rows.append(
            (
                "1 sender process, cold: the process started within the run",
                f"{statistics.median(colds) * 1000:,.0f}",
                f"{cold_eps:,.0f}",
            )
        )
        print(
            f"{EVENTS} events of 1 KiB in {EVENTS // PER_OBJECT} objects; the floor and the "
            f"default: median of {2 * ROUNDS}, the others of {ROUNDS}"
        )
        print(f"load average before the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print_table(rows, ("path", "ms", "events/s"))
        print_table(
            [(k, *(f"{v:,.0f}" for v in w.values())) for k, w in where.items()],
            ("where the time goes (mean ms)", "wall", "this process", "senders", "moto"),
        )
        processes = default[3]
        write_result(
            "replay",
            {
                "events_per_s": eps[default],
                "replay_ratio_vs_read": eps[default] / read_eps,
                "events_per_s_1_process": eps[POOL],
                "replay_ratio_vs_read_1_process": eps[POOL] / read_among_eps,
                "events_per_s_1_process_cold": cold_eps,
                "replay_ratio_vs_read_1_process_cold": cold_eps / read_among_eps,
                "events_per_s_2_processes": eps[1000, 4, True, 2],
                "events_per_s_2_processes_8_in_flight": eps[1000, 8, True, 2],
                "events_per_s_threads": eps[THREADS],
                "events_per_s_default_among_others": among_eps,
                "events_per_s_former_default": eps[FORMER],
                "read_events_per_s": read_eps,
                "send_alone_packed_events_per_s": send_p_eps,
                "replay_ratio_vs_send_alone_packed": among_eps / send_p_eps,
                "read_events_per_s_among_others": read_among_eps,
                "replay_ratio_vs_read_among_others": among_eps / read_among_eps,
                "speedup_vs_former_default": eps[default] / eps[FORMER],
                "send_processes_default": processes,
                "load_average_1m": load[0],
                **{f"{k}_{m}": v for k, w in where.items() for m, v in w.items()},
            },
            f"{EVENTS} archived 1 KiB events replayed to one trigger's standard SQS queue on local "
            f"mode (embedded moto in its own process), in packs of about {per_pack} events, "
            f"checkpoint (DynamoDB) every {BATCH_EVENTS} events (a batch spans archive objects), "
            f"{SEND_CONCURRENCY} SendMessageBatch calls in flight, the next batch read meanwhile; "
            f"events_per_s is the default ({processes} sender processes: the calls made by "
            "threads of the replaying process). events_per_s_1_process is the same with the "
            "calls made by 1 sender process, WARM: the process was started before the clock "
            "started (as in a warm Lambda container or a running local runtime); "
            "events_per_s_1_process_cold is the same replay with the pool stopped before it, so "
            "that its start (spawning the process, importing boto3, the first call's connection) "
            "is inside the timed run; 2 processes, and 2 with 8 calls in flight, are timed too. "
            "The floor reads the same objects alone (list, get, parse, select); the local SQS "
            "endpoint alone with the packs' bytes (one call at a time, nothing else) and the "
            "former default (one event a message, checkpoint every 100 events) are timed in the "
            f"same run. The floor and the default replay are timed in turn {2 * ROUNDS} times "
            "with nothing else between them (after an untimed replay: the runner's first run in "
            "a process also freezes its long-lived heap, chalicelib/heap.py); then each of "
            f"{ROUNDS} rounds times the former default first, then an untimed replay, then "
            "the floor again (read_events_per_s_among_others: the ratios of these rounds, "
            "*_1_process*, *_among_others and vs_send_alone_packed, are to it and to the send "
            "floor of the same rounds) and the others (the default among them again: "
            "events_per_s_default_among_others) in "
            "an order that turns each round (whatever ran just after the former "
            "default was slower). The *_ms figures are the mean wall and CPU time per process "
            "(this one, the sender processes, moto's; /proc, 10 ms ticks) of ROUNDS more runs. "
            f"Medians; load average {load[0]:.2f} when it started, on "
            f"{os.cpu_count()} cores",
        )
    finally:
        c.stop_replay_sends()
        aws.stop()


if __name__ == "__main__":
    main()
