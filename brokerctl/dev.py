"""``brokerctl dev``: local mode in one foreground process (design.md §6).

An embedded moto server (unless ``--endpoint`` or AWS_ENDPOINT_URL points elsewhere), the shared
resources created on it, the Chalice app served over real HTTP, the SQS event source mappings
emulated in-process, and the reconciler on a timer. Ctrl-C stops everything.

Against an external endpoint (LocalStack) the Lambda code still runs here, and the control plane
creates its SQS event source mappings disabled (BROKER_MAPPINGS_ENABLED=false): the emulator's own
pollers would otherwise receive the same messages, fail to invoke the stand-in functions and spend
receive counts, which count delivery attempts. The pollers here consume the disabled mappings.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from brokerctl.embedded_aws import EmbeddedAws, port_is_free
from brokerctl.http_server import AppServer


@dataclass
class DevOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    aws_port: int = 4566
    # As deployed (app.py: rate(5 minutes)). A run reads every queue's attributes: with 500
    # triggers, 1,000 calls, which every 30 s took a quarter of the broker's time.
    reconcile_interval: float = 300.0
    cache_ttl: float | None = None
    kafka: bool = False  # run a local Kafka (Tansu) and emulate Kafka event source mappings
    kafka_port: int = 9092
    kafka_bootstrap: str | None = None  # use this Kafka instead of starting one
    # "localstack" (resolved by localstack-client), a URL, or None: AWS_ENDPOINT_URL, else embedded
    endpoint: str | None = None
    # NAME=module:handler: local Lambda functions for ARN subscribers (brokerctl/local_functions.py)
    functions: tuple[str, ...] = ()


_print_lock = threading.Lock()
# Listing every event source mapping costs the endpoint time in proportion to their number (1,000
# with 500 triggers): re-read them at once when the control plane changes one (MAPPING_OPERATIONS),
# and every two minutes for changes made elsewhere.
MAPPING_REFRESH_SECONDS = 120.0
REPLAY_INTERVAL = 0.5
REPLAY_TURN_SECONDS = 5.0
REPLAY_IDLE_SECONDS = 30.0
MAPPING_OPERATIONS = (
    "CreateEventSourceMapping",
    "UpdateEventSourceMapping",
    "DeleteEventSourceMapping",
)


def _say(line: str) -> None:
    # Several threads report at once (HTTP server, pollers, scheduler): one whole line each.
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def external_endpoint(option: str | None) -> str | None:
    """The AWS endpoint to use instead of the embedded moto server, or None.

    ``localstack`` follows localstack-client's conventions: ``AWS_ENDPOINT_URL`` when set, else
    ``LOCALSTACK_HOST`` (default ``localhost:4566``), https with ``USE_SSL``. Any other value is an
    endpoint URL; without the option, ``AWS_ENDPOINT_URL``.
    """
    if option == "localstack":
        from localstack_client.config import get_service_endpoint

        return str(get_service_endpoint("sqs"))
    return option or os.environ.get("AWS_ENDPOINT_URL") or None


def _configure_environment(opts: DevOptions, endpoint: str, external: bool) -> None:
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    # The emulator's own pollers must not consume the trigger queues (see the module docstring).
    os.environ["BROKER_MAPPINGS_ENABLED"] = "false" if external else "true"
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.setdefault("AWS_REGION", os.environ["AWS_DEFAULT_REGION"])
    # Local mode is explicit (chalicelib/config.py): set here, and only here, with both variables,
    # whatever a shell left behind (a BROKER_STAGE=prod from a deploy would refuse local mode).
    os.environ["BROKER_STAGE"] = "local"
    os.environ["BROKER_LOCAL_MODE"] = "true"
    os.environ["BROKER_PUBLIC_URL"] = f"http://{opts.host}:{opts.port}"
    if opts.cache_ttl is not None:
        os.environ["BROKER_CACHE_TTL_SECONDS"] = str(opts.cache_ttl)
    # Archive records gathered for a second across requests, as Firehose buffers before S3: one
    # archive call for many events instead of one per request (chalicelib/services/archiver.py).
    os.environ.setdefault("BROKER_ARCHIVE_BATCH_SECONDS", "1")
    # Local mode aggregates metrics itself and serves them at /metrics; EMF to stdout would flood.
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "ServerlessBroker")
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "serverless-broker")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")


class _Timer(threading.Thread):
    def __init__(self, interval: float, fn: Callable[[], None], log: Callable[[str], None]) -> None:
        super().__init__(name="scheduler", daemon=True)
        self._interval = interval
        self._fn = fn
        self._log = log
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self._interval):
            try:
                self._fn()
            except Exception as exc:
                self._log(f"reconciler: {type(exc).__name__}: {exc}")

    def stop(self) -> None:
        self._halt.set()


class _ReplayLoop(threading.Thread):
    """Runs replays in turns of at most REPLAY_TURN_SECONDS: at once when one is created, every
    REPLAY_INTERVAL while some are unfinished (waiting for the archive to settle, or longer than
    a turn), and otherwise idle (a check every REPLAY_IDLE_SECONDS for replays created
    elsewhere)."""

    def __init__(self, runner: Any, log: Callable[[str], None]) -> None:
        super().__init__(name="scheduler-replayer", daemon=True)
        self._runner = runner
        self._log = log
        self._halt = threading.Event()

    def run(self) -> None:
        busy = True  # replays left unfinished by an earlier runtime on the same endpoint
        while not self._halt.is_set():
            if busy or self._runner.wait_for_work(REPLAY_IDLE_SECONDS):
                if self._halt.is_set():
                    return
                try:
                    self._runner.run_pending(REPLAY_TURN_SECONDS)
                    busy = self._runner.unfinished > 0
                except Exception as exc:  # retried from its checkpoint in half a second
                    self._log(f"replayer: {type(exc).__name__}: {exc}")
                    busy = True
            if busy:
                self._halt.wait(REPLAY_INTERVAL)

    def stop(self) -> None:
        self._halt.set()
        self._runner.wake()


def scheduled_event(region: str) -> dict[str, object]:
    """The EventBridge "Scheduled Event" that invokes a scheduled function on AWS."""
    import uuid

    from chalicelib.core.clock import rfc3339, utcnow

    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": rfc3339(utcnow(), "seconds"),
        "region": region,
        "resources": [f"arn:aws:events:{region}:123456789012:rule/serverless-broker-reconciler"],
        "detail": {},
    }


def _configure_logging() -> None:
    import logging

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    broker = logging.getLogger("broker")
    broker.addHandler(handler)
    broker.setLevel(logging.INFO)
    broker.propagate = False
    # Here every delivery is shown (deployed, a success is DEBUG: CloudWatch Logs bills by GB).
    logging.getLogger("broker.delivery").setLevel(logging.DEBUG)


class LocalRuntime:
    """Everything ``brokerctl dev`` runs, startable and stoppable in-process (the benchmarks use
    it too). ``start`` returns an exit code: 0, or 2 when a port is taken or Kafka fails."""

    def __init__(self, opts: DevOptions, say: Callable[[str], None] = _say) -> None:
        self.opts = opts
        self.say = say
        self.url = f"http://{opts.host}:{opts.port}"
        self.container: Any = None
        self.sources: Any = None
        self.schedules: Any = None
        self.console: Any = None
        self._stack: list[Callable[[], None]] = []

    def start(self) -> int:
        opts, say = self.opts, self.say
        if not port_is_free(opts.host, opts.port):
            print(f"error: port {opts.port} is in use (use --port or BROKER_PORT)", file=sys.stderr)
            return 2
        from brokerctl.local_functions import FunctionSpecError, load_handlers

        try:
            handlers = load_handlers(opts.functions)
        except FunctionSpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        endpoint = external_endpoint(opts.endpoint)
        external = endpoint is not None
        if endpoint:
            say(f"using the AWS endpoint at {endpoint} (event source mappings created disabled)")
        else:
            embedded = EmbeddedAws(opts.host, opts.aws_port)
            try:
                endpoint = embedded.start()
            except (OSError, RuntimeError) as exc:  # in use, not started, or another moto
                print(f"error: {exc}", file=sys.stderr)
                return 2
            self._stack.append(embedded.stop)
            say(f"embedded AWS endpoint (moto) on {endpoint}")
        _configure_environment(opts, endpoint, external)
        local_kafka, kafka_bootstrap = _start_kafka(opts)
        if local_kafka is not None:
            self._stack.append(local_kafka.stop)
        if opts.kafka and kafka_bootstrap is None:
            self.stop()
            return 2
        if kafka_bootstrap is not None:  # MSK clusters are the local Kafka (kafka_local.py)
            os.environ["BROKER_KAFKA_MSK_BOOTSTRAP"] = kafka_bootstrap

        # Imported only now: the app reads its settings from the environment configured above.
        import app as chalice_app
        from brokerctl.bootstrap import bootstrap
        from brokerctl.event_sources import SqsEventSources
        from chalicelib.container import get_container

        self.container = container = get_container()
        settings = container.settings
        # The console's live tail sees every archive record as it is written (docs/console.md).
        from brokerctl.console import Console, TailHub, TappedArchive

        self.console = Console(TailHub())
        hub = self.console.hub
        container.tap_archive(lambda archive: TappedArchive(archive, hub))
        self._stack.append(self.console.stop)
        bootstrap(settings, container.clients, say=say)
        if handlers:  # moto runs no Lambda code: these answer Invoke for their names
            from brokerctl.local_functions import LocalFunctions
            from chalicelib.adapters.aws_targets import Boto3Targets

            targets = container.aws_targets
            assert isinstance(targets, Boto3Targets)  # the runtime's, as deployed
            targets.customize("lambda", LocalFunctions(handlers, settings.region).attach)
            say(f"local Lambda functions: {', '.join(sorted(handlers))}")
        # Stopped after everything that archives, before the endpoint: the last second of
        # archive records is written while the endpoint still answers.
        from chalicelib.services import archiver

        self._stack.append(archiver.flush_all)

        sources = SqsEventSources(
            container.clients,
            {
                settings.delivery_function: chalice_app.delivery,
                settings.dead_letter_function: chalice_app.dead_letter,
                settings.sources_function: chalice_app.sources,  # IntegrationSources' queues
            },
            settings.region,
            say,
            refresh_seconds=MAPPING_REFRESH_SECONDS,
            include_disabled=not settings.mappings_enabled,
        )
        # The control plane runs in this process: a mapping it creates, changes or deletes is
        # picked up at once; the periodic re-read is the safety net for changes made elsewhere.
        events = container.clients.client("lambda").meta.events
        for operation in MAPPING_OPERATIONS:
            events.register(f"after-call.lambda.{operation}", sources.poke)
        sources.watch_sends(container.clients.client("sqs"))  # an idle queue's pollers wake
        if not external:
            # The embedded endpoint stops with this process and its queues with it: a poller in a
            # long poll has nothing to hand back, so stopping does not wait out its receive
            # (5 s of every Ctrl-C). An external endpoint outlives us: there the wait lets a
            # poller that received during the stop hand its messages back unprocessed.
            sources.join_timeout = 0.0
        sources.start()
        self.sources = sources
        self._stack.append(sources.stop)
        # Lambda's Kafka poller, always: each KafkaSource's mapping is read from the clusters its
        # bootstrap servers name, as on AWS; --kafka only adds a local Kafka (which MSK mappings
        # use, having no cluster to resolve locally).
        from brokerctl.kafka_local import KafkaEventSources

        kafka_sources = KafkaEventSources(
            container.clients, settings.kafka_function, chalice_app.kafka_ingress, say,
            local_bootstrap=kafka_bootstrap, refresh_seconds=MAPPING_REFRESH_SECONDS,
        )  # fmt: skip
        for operation in MAPPING_OPERATIONS:
            events.register(f"after-call.lambda.{operation}", kafka_sources.poke)
        kafka_sources.start()
        self._stack.append(kafka_sources.stop)
        # IntegrationSources' streams and buckets (brokerctl/source_pollers.py): Lambda's stream
        # poller and S3's EventBridge notifications, into the same ``sources`` function.
        from brokerctl.source_pollers import BucketEvents, StreamEventSources

        streams = StreamEventSources(
            container.clients, settings.sources_function, chalice_app.sources, settings.region,
            say, refresh_seconds=MAPPING_REFRESH_SECONDS,
        )  # fmt: skip
        for operation in MAPPING_OPERATIONS:
            events.register(f"after-call.lambda.{operation}", streams.poke)
        streams.start()
        self._stack.append(streams.stop)
        buckets = BucketEvents(
            container.clients, settings.queue_prefix, chalice_app.sources,
            settings.sources_function, settings.region, say,
        )  # fmt: skip
        container.clients.client("events").meta.events.register(
            "after-call.events.PutTargets", buckets.poke
        )
        buckets.start()
        self._stack.append(buckets.stop)
        # EventBridge Scheduler's part: the sources' schedules fired on time into the same
        # ``pings`` function (brokerctl/local_schedules.py), re-read when the control plane
        # changes one.
        from brokerctl.local_schedules import SCHEDULE_OPERATIONS, LocalSchedules
        from chalicelib.adapters.scheduler_schedules import SchedulerSchedules

        self.schedules = LocalSchedules(
            SchedulerSchedules(container.clients, settings.region, "", ""), settings.queue_prefix,
            chalice_app.pings, say, function_name=settings.pings_function,
        )  # fmt: skip
        scheduler_events = container.clients.client("scheduler").meta.events
        for operation in SCHEDULE_OPERATIONS:
            scheduler_events.register(f"after-call.scheduler.{operation}", self.schedules.poke)
        self.schedules.start()
        self._stack.append(self.schedules.stop)
        timer = _Timer(
            opts.reconcile_interval,
            lambda: chalice_app.reconciler(scheduled_event(settings.region), None),
            say,
        )
        timer.start()
        self._stack.append(timer.stop)
        # The replayer (app.py, a one-minute schedule on AWS), woken by each new replay and
        # running short turns while replays are unfinished (docs/replay.md).
        replays = _ReplayLoop(container.replay_runner, say)
        replays.start()
        self._stack.append(replays.stop)
        server = AppServer(chalice_app.app, opts.host, opts.port, say, console=self.console)
        server.start()
        self._stack.append(server.stop)
        _wait_healthy(server.url)
        return 0

    def stop(self) -> None:
        while self._stack:
            self._stack.pop()()


def run_dev(opts: DevOptions) -> int:
    _configure_logging()
    runtime = LocalRuntime(opts)
    code = runtime.start()
    if code:
        return code
    stop = threading.Event()

    def _on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    _say(f"ready: {runtime.url}")
    try:
        while not stop.wait(0.5):
            pass
    finally:
        _say("stopping...")
        runtime.stop()
        _say("stopped")
    return 0


def _start_kafka(opts: DevOptions) -> tuple[Any, str | None]:
    """(the local Kafka we started or None, the bootstrap address or None without --kafka)."""
    if not opts.kafka:
        return None, None
    if opts.kafka_bootstrap:
        _say(f"kafka: using {opts.kafka_bootstrap}")
        return None, opts.kafka_bootstrap
    from brokerctl.kafka_local import LocalKafka

    if not port_is_free(opts.host, opts.kafka_port):
        print(
            f"error: Kafka port {opts.kafka_port} is in use (use --kafka-port or "
            "BROKER_KAFKA_PORT, or --kafka-bootstrap for a running Kafka)",
            file=sys.stderr,
        )
        return None, None
    kafka = LocalKafka(opts.host, opts.kafka_port)
    try:
        bootstrap = kafka.start()
    except (OSError, RuntimeError) as exc:
        print(f"error: local Kafka (Tansu) did not start: {exc}", file=sys.stderr)
        return None, None
    _say(f"kafka (Tansu) on {bootstrap}")
    return kafka, bootstrap


def _wait_healthy(url: str, timeout: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url}/healthz did not answer 200 within {timeout:.0f} s")
        time.sleep(0.05)
