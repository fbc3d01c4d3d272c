"""moto builds every attribute of a queue whenever one is read (``Queue.attributes``), three of
them by walking all its messages, and every SendMessage reads one (``ContentBasedDeduplication``,
which a standard queue does not even have), as does every receive (the retention period of each
message handed out): a send to or a receive from a queue holding N messages cost O(N), so a burst,
or a queue of retries waiting out their backoff, made the endpoint quadratic. No moto issue is
filed. The attributes become a mapping that computes only what is read, with the same keys and
values as moto's dict (``attributes_as_moto_builds_them`` keeps moto's, for the tests)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


def compute_on_demand() -> None:
    from moto.core.utils import camelcase_to_underscores
    from moto.sqs import models

    build_all = vars(models.Queue)["attributes"].fget
    assert build_all is not None

    class QueueAttributes(Mapping[str, Any]):
        def __init__(self, queue: Any) -> None:
            self._queue = queue

        def _names(self) -> list[str]:
            q = self._queue
            names = list(q.BASE_ATTRIBUTES)
            if q.fifo_queue:
                names += q.FIFO_ATTRIBUTES
            if q.kms_master_key_id:
                names += q.KMS_ATTRIBUTES
            return names

        def __iter__(self) -> Iterator[str]:
            return iter(self._names())

        def __len__(self) -> int:
            return len(self._names())

        def __getitem__(self, name: str) -> Any:
            if name not in self._names():
                raise KeyError(name)
            q = self._queue
            if name == "RedrivePolicy" and q.redrive_policy:
                return json.dumps(q.redrive_policy)
            value = getattr(q, camelcase_to_underscores(name))
            return str(value).lower() if isinstance(value, bool) else value

    models.Queue.attributes = property(QueueAttributes)  # type: ignore[assignment,method-assign]
    models.Queue.attributes_as_moto_builds_them = property(build_all)  # type: ignore[attr-defined]
