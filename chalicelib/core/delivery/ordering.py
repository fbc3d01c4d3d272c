"""Ordered delivery on SQS FIFO queues (docs/ordering.md): which message group an event joins,
which deduplication id a send carries, and which records of a batch a failure holds back.

Groups: the CloudEvents ``partitionkey`` extension (the partitioning extension), else one group
for the whole trigger. A key SQS cannot take as a MessageGroupId (over 128 characters, or a
character outside ASCII letters, digits and punctuation) is replaced by its SHA-256, so every
key still has one group of its own and the same key always the same group.

Deduplication: SQS FIFO drops a message whose MessageDeduplicationId it saw in the last five
minutes (per group here: DeduplicationScope=messageGroup). Two distinct messages must never share
one; a retried send of the same message should. So each id names what is sent, not when:
the body for the ingress (it holds the event's id, source and arrival time: a retried
SendMessageBatch entry collapses; a distinct event, or the same event posted again later, does
not), and the message being moved for a move between queues (to the DLQ, or back by redrive).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

PARTITION_KEY = "partitionkey"
# The group of the events without a partitionkey: each trigger has its own queue, so one group
# per trigger needs only one name.
UNKEYED_GROUP = "unkeyed"
MAX_GROUP_ID_LENGTH = 128
# SQS: MessageGroupId and MessageDeduplicationId take alphanumerics and punctuation
# (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~), up to 128 characters.
_SQS_ID = re.compile(r"^[A-Za-z0-9!-/:-@\[-`{-~]{1,128}$")
GROUP_ATTRIBUTE = "MessageGroupId"  # as SQS reports it among a received message's attributes


def message_group(partition_key: object) -> str:
    """The MessageGroupId of an event whose ``partitionkey`` is ``partition_key`` (None: none)."""
    if partition_key is None:
        return UNKEYED_GROUP
    key = str(partition_key)
    if _SQS_ID.fullmatch(key):
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def group_for(fifo: bool, partition_key: object) -> str | None:
    """The MessageGroupId of a send to a queue (None on a standard queue, which has no groups):
    ingress and replays put an event in the same group of an ordered trigger's queue."""
    return message_group(partition_key) if fifo else None


def body_dedup_id(body: str) -> str:
    """The deduplication id of a message the ingress sends: the SHA-256 of its body."""
    return hashlib.sha256(body.encode()).hexdigest()


def moved_dedup_id(message_id: str) -> str:
    """The deduplication id of a message moved from one queue to another: the id the message had
    where it came from (a move retried after a failed delete collapses; a message redriven and
    dead-lettered again has a new id in the queue, so it is not taken for the first move)."""
    return message_id if _SQS_ID.fullmatch(message_id) else body_dedup_id(message_id)


def group_of(attributes: Mapping[str, str]) -> str:
    """The group of a received FIFO message (its SQS attributes), for sends that move it."""
    return attributes.get(GROUP_ATTRIBUTE) or UNKEYED_GROUP
