"""The process's long-lived heap kept out of the garbage collector's full collections.

A broker process holds a few hundred thousand long-lived objects that the collector tracks: the
modules it imported and, above all, botocore's service models (S3's, SQS's and DynamoDB's, as
dicts and shapes). CPython's full (oldest-generation) collection visits every one of them; here
that took 100-160 ms, and a replay triggers one every few thousand events, because its batches
live long enough (read ahead, then sent) to be promoted to the oldest generation. Measured in
the replay benchmark with 20,000 events: 0.6 full collections a run, 93 ms of it in all; after
``gc.freeze()``, 0.7 ms, and the run 22% faster (docs/replay.md, Throughput).

``settle()`` collects once, then freezes what is alive (``gc.freeze``: moved to a permanent
generation the collector no longer visits), once per process, after the first replay run that
ends normally (by then the clients the runner uses exist, and the run's own batches are gone).
Objects made later are collected as before; frozen ones are still freed when nothing refers to
them (reference counting), and only a reference cycle among them would outlive its use: a
one-time cost, bounded by what was alive at that moment, which in the local runtime's process
includes other threads' work in flight (a request, a poller's batch). The first run also pays
for one full collection (100-160 ms here), after its work. ``BROKER_FREEZE_HEAP=false`` leaves
the collector alone.
"""

from __future__ import annotations

import gc
import threading

from chalicelib import logs

log = logs.get("heap")

_lock = threading.Lock()
_settled = False


def settle() -> bool:
    """Collect, then freeze the live heap, the first time in this process (and only when the
    collector is on); True when this call did it."""
    global _settled
    with _lock:
        if _settled or not gc.isenabled():
            return False
        _settled = True
        gc.collect()
        gc.freeze()
    log.info("froze %d long-lived objects out of full collections", gc.get_freeze_count())
    return True


def keep_collector() -> None:
    """``settle()`` does nothing in this process from now on (the test processes: many tests'
    objects are alive at any moment, and freezing them is not what those tests test)."""
    global _settled
    with _lock:
        _settled = True
