"""Whether a trigger's AWS target can be reached (docs/targets.md): the target service's cheap
describe call (GetFunction, GetQueueAttributes, GetTopicAttributes, DescribeStateMachine,
DescribeEventBus, DescribeStreamSummary, DescribeDeliveryStream), made when a status is read and
remembered for ``ttl`` seconds per ARN, so that listing triggers does not call AWS each time."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from chalicelib import logs
from chalicelib.core.delivery.aws_targets import classify_error, is_arn
from chalicelib.ports import AwsTargets

log = logs.get("control_plane")

DEFAULT_TTL_SECONDS = 30.0
MAX_ENTRIES = 1024

Problem = tuple[str, str]  # (the condition's reason, its message)


class TargetChecks:
    def __init__(
        self,
        targets: AwsTargets,
        ttl: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._targets = targets
        self._ttl = ttl
        self._clock = clock
        self._seen: OrderedDict[str, tuple[float, Problem | None]] = OrderedDict()
        self._lock = threading.Lock()

    def problem(self, uri: str | None) -> Problem | None:
        """Why the target ``uri`` names cannot be delivered to (reason SubscriberNotFound or
        SubscriberNotAuthorized, and the service's words), or None: reachable, not an ARN, or
        not known now (a throttled or failed check says nothing about the target: not kept)."""
        if uri is None or not is_arn(uri):
            return None
        now = self._clock()
        with self._lock:
            seen = self._seen.get(uri)
            if seen is not None and now - seen[0] < self._ttl:
                return seen[1]
        result = self._targets.check(uri)
        found: Problem | None = None
        if not result.ok:
            status = classify_error(result.code or "", result.http_status).status
            said = f"{result.code}: {result.message}"
            if status == 404:
                found = ("SubscriberNotFound", f"{uri} does not exist ({said})")
            elif status == 403:
                found = ("SubscriberNotAuthorized", f"{uri} refuses the broker's role ({said})")
            else:
                log.warning("could not check %s: %s", uri, said, extra={"target": uri})
                return None
        with self._lock:
            self._seen[uri] = (now, found)
            self._seen.move_to_end(uri)
            while len(self._seen) > MAX_ENTRIES:
                self._seen.popitem(last=False)
        return found
