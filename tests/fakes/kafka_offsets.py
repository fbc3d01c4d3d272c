"""An in-memory KafkaOffsets (chalicelib/ports.py): a cluster's topics (the log end of each
partition) and its consumer groups' committed offsets."""

from __future__ import annotations

from typing import Any

from chalicelib.core.errors import UnavailableError


class MemoryKafkaOffsets:
    def __init__(self) -> None:
        # (cluster id, topic) -> log end per partition; a topic nobody set has one empty partition
        self.topics: dict[tuple[str, str], list[int]] = {}
        self.missing_topics: set[tuple[str, str]] = set()
        # (cluster id, group) -> (topic, partition) -> committed offset
        self.groups: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
        self.unavailable: str | None = None  # the reason every call fails, while set
        self.calls = 0

    def initialize(self, source: Any) -> int:
        self.calls += 1
        if self.unavailable is not None:
            raise UnavailableError(self.unavailable)
        key = (source.cluster_id, source.topic)
        if key in self.missing_topics:
            raise UnavailableError(f"topic {source.topic!r} does not exist (or has no partitions)")
        ends = self.topics.get(key, [0])
        group = self.groups.setdefault((source.cluster_id, source.consumer_group), {})
        committed = 0
        for partition, end in enumerate(ends):
            if (source.topic, partition) not in group:
                group[(source.topic, partition)] = end
                committed += 1
        return committed
