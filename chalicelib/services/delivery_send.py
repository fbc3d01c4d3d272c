"""The send pass of a delivery batch (docs/delivery.md): the one place that knows transports. It
turns an event into the request its destination takes (HTTP: binary or structured mode with the
trace and the role's headers; Kafka: a record) and sends every job of a batch, a fixed number in
flight (``DeliveryParts.in_flight``), paced by a trigger's max-rate where one applies."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from chalicelib.core.cloudevents import codec
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.kafka_binding import encode_binary_record, encode_structured_record
from chalicelib.core.delivery.aws_targets import is_target
from chalicelib.ports import HttpResponse, PublishResult
from chalicelib.services import delivery_aws, tracing
from chalicelib.services.delivery_jobs import DeliveryParts, Destination, Job
from chalicelib.services.flow_control import RateGate
from chalicelib.services.ingress import TTL_ATTRIBUTE
from chalicelib.services.oidc import subject
from chalicelib.services.routing import Route


class Sender:
    def __init__(
        self,
        parts: DeliveryParts,
        request_headers: Mapping[str, str],
        pool: ThreadPoolExecutor,
        load: Callable[[Job], None],
        rate: RateGate | None,
    ) -> None:
        """``load``: reads a claim-checked event and builds its request, on the sending thread;
        ``rate``: the max-rate gate (None: rates are not enforced for this role)."""
        self._parts = parts
        self._request_headers = request_headers
        self._pool = pool
        self._load = load
        self._rate = rate
        self._lanes = max(1, parts.in_flight)

    @property
    def paced(self) -> bool:
        return self._rate is not None

    # ---- the request ---------------------------------------------------------------------------

    def encode(self, job: Job, event: CloudEvent) -> None:
        """Build ``job``'s HTTP request for ``event`` (a Kafka record is built when published)."""
        if job.destination.kafka is not None or is_target(job.destination.target):
            return  # a record, or an AWS call, is built when sent
        if job.destination.route.delivery.format == "json":
            headers, body = codec.encode_structured(
                event.replace_attributes(remove=(TTL_ATTRIBUTE,))
            )
        else:
            headers, body = codec.encode_binary(event, omit=TTL_ATTRIBUTE)
        queued = job.queued
        for name, value in queued.headers.items():
            if name != "traceparent" and name != "tracestate":  # the next hop's come below
                headers[name] = value
        headers.update(tracing.next_hop(queued.headers))
        headers["Kn-Namespace"] = queued.namespace
        headers.update(self._request_headers)
        job.headers, job.body = headers, body

    def transmit(self, job: Job) -> None:
        """Send one job's request (on any thread); never raises: a failure is kept on the job.
        An event of a pack whose attempt could outlast the invocation is not sent (deferred)."""
        if job.until is not None and time.monotonic() > job.until:
            job.deferred = True
            return
        try:
            if job.event is None:
                self._load(job)
        except Exception as exc:  # e.g. the claim-check object could not be read: retried
            job.error = exc
            return
        assert job.event is not None
        if job.decided is not None:  # a transform's outcome: nothing to send
            return
        to = job.destination
        try:
            if to.kafka is not None:
                outgoing = job.outgoing or job.event
                job.sent = self._publish(to.route, outgoing, *to.kafka, to.timeout)
            elif is_target(to.target):  # an AWS target or a log sink (docs/targets.md)
                outgoing = job.outgoing or job.event
                job.sent = delivery_aws.send(
                    self._parts.targets, to.target, outgoing, to.route.name, to.timeout
                )
            else:
                job.sent = self._post(to, job.headers, job.body)
        except Exception as exc:
            # Whatever the sender raised (a header it refuses to write, a bug in a client
            # library) is this attempt's outcome, as a transport error with its reason: it is
            # retried with backoff and dead-lettered with knativeerror* like any other, instead
            # of waiting out the visibility timeout and reaching the DLQ without a reason.
            reason = f"{type(exc).__name__}: {exc}"
            job.sent = HttpResponse(None, {}, f"send error: {reason}".encode(), reason)

    def _post(self, to: Destination, headers: dict[str, str], body: bytes) -> HttpResponse:
        """POST to an HTTP destination, authenticated as its access says (design.md §2.5):
        credentials are added here, per attempt, never kept on the job. Raises when none can be
        had (the attempt is a transport error: retried)."""
        access = to.access
        sender = self._parts.sender
        if access.ca_certs is not None:
            sender = sender.trusting(access.ca_certs)
        if access.audience is not None:
            headers = {**headers, "Authorization": self._authorization(to.route, access.audience)}
        if access.connection is None:
            return sender.post(to.target, headers, body, to.timeout)
        auth = self._parts.connections
        if auth is None:
            raise RuntimeError("no connection credentials: this function cannot use connections")
        connection = auth.connection(to.route.namespace, access.connection)
        sent = sender.post(
            to.target, auth.authorize(connection, to.target, headers, body), body, to.timeout
        )
        if sent.status == 401 and auth.refreshes(connection):
            # The token may have been revoked before it expired: one fresh token, one more try.
            auth.forget(connection)
            sent = sender.post(
                to.target, auth.authorize(connection, to.target, headers, body), body, to.timeout
            )
        return sent

    def _authorization(self, route: Route, audience: str) -> str:
        """``Bearer <JWT>`` for ``audience``, naming the route's trigger."""
        if self._parts.tokens is None:
            raise RuntimeError("no token issuer: this function cannot sign tokens")
        return self._parts.tokens.authorization(audience, subject(route.namespace, route.name))

    def _publish(
        self, route: Route, event: CloudEvent, servers: str, topic: str, timeout: float
    ) -> PublishResult:
        """A ``kafka://`` subscriber (design.md §10): one record, binary mode (structured with
        ``format: json``), key from ``partitionkey``, acks=all."""
        outgoing = event.replace_attributes(remove=(TTL_ATTRIBUTE,))
        if route.delivery.format == "json":
            record = encode_structured_record(outgoing)
        else:
            record = encode_binary_record(outgoing)
        if self._parts.kafka is None:
            return PublishResult(False, "no Kafka publisher is configured")
        return self._parts.kafka.publish(servers, topic, record, timeout)

    # ---- a batch -------------------------------------------------------------------------------

    def send_all(self, jobs: list[Job]) -> None:
        """Send every job's request, up to ``in_flight`` at once: each lane (the calling thread
        is one) takes the next job in queue order until none is left."""
        pending = iter(jobs)  # shared: each lane takes the next job

        def lane() -> None:
            for job in pending:
                self.transmit(job)

        self._run_lanes(lane, len(jobs))

    def send_paced(self, jobs: list[Job], outcomes: list[Exception | None]) -> list[Job]:
        """``send_all`` for a role whose triggers may have a max-rate (docs/flow-control.md):
        each granted job is sent at its token's due time, the delayed ones are settled here
        (their outcomes set by job index), the others are sent as usual. Returns the jobs that
        were sent. Raises when a bucket could not be read (nothing was sent)."""
        assert self._rate is not None
        free, timed, delayed = self._rate.admit(jobs)
        for index, outcome in delayed.items():
            outcomes[index] = outcome
        if free:
            self.send_all(free)
        timed.sort(key=lambda pair: pair[0])
        pending = iter(timed)  # shared: each lane takes the next job due

        def lane() -> None:
            for due, job in pending:
                self.wait_until(due)
                self.transmit(job)

        self._run_lanes(lane, len(timed))
        return free + [job for _, job in timed]

    def admit_one(self, job: Job) -> tuple[bool, Exception | None]:
        """An ordered trigger's job under its max-rate: (False, None) once its token is due, or
        (True, its record's outcome) when it was delayed (handed back, or copied to wait in its
        queue)."""
        assert self._rate is not None
        _, timed, delayed = self._rate.admit([job], fifo=True)
        if delayed:
            return True, delayed[job.index]
        self.wait_until(timed[0][0])
        return False, None

    def wait_until(self, due: float) -> None:
        wait = due - time.monotonic()
        if wait > 0:
            self._parts.sleep(wait)

    def _run_lanes(self, lane: Callable[[], None], jobs: int) -> None:
        if jobs <= 0:
            return
        helpers = [self._pool.submit(lane) for _ in range(min(self._lanes, jobs) - 1)]
        lane()  # the calling thread is one of the lanes
        for helper in helpers:
            helper.result()
