"""Queues on SQS. Names are the identifiers; URLs are cached per warm container."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import error_code, translated
from chalicelib.core.errors import NotFoundError
from chalicelib.ports import OutgoingMessage, QueueInfo, ReceivedMessage

LIST_WORKERS = 32  # concurrent attribute reads in ``list`` (boto3 clients are thread-safe)


class SqsQueues:
    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients
        self._urls: dict[str, str] = {}

    @property
    def _sqs(self) -> Any:
        return self._clients.client("sqs")

    def _url(self, name: str) -> str:
        url = self._urls.get(name)
        if url is None:
            from botocore.exceptions import ClientError

            try:
                url = self._sqs.get_queue_url(QueueName=name)["QueueUrl"]
            except ClientError as exc:
                if "NonExistentQueue" in error_code(exc) or "QueueDoesNotExist" in error_code(exc):
                    raise NotFoundError(f"queue {name} does not exist") from exc
                with translated(f"queue {name}"):
                    raise
            self._urls[name] = url
        return url

    def create(self, name: str, attributes: Mapping[str, str]) -> QueueInfo:
        with translated(f"create queue {name}"):
            url = self._sqs.create_queue(QueueName=name, Attributes=dict(attributes))["QueueUrl"]
        self._urls[name] = url
        return self._info(name, url)

    def get(self, name: str) -> QueueInfo | None:
        try:
            url = self._url(name)
            return self._info(name, url)
        except NotFoundError:
            self._urls.pop(name, None)
            return None

    def _info(self, name: str, url: str) -> QueueInfo:
        with translated(f"queue attributes {name}"):
            attrs = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
        attributes = attrs.get("Attributes", {})
        return QueueInfo(
            name=name, url=url, arn=attributes.get("QueueArn", ""), attributes=attributes
        )

    def list(self, prefix: str) -> builtins.list[QueueInfo]:
        urls: builtins.list[str] = []
        kwargs: dict[str, Any] = {"QueueNamePrefix": prefix, "MaxResults": 1000}
        with translated("list queues"):
            while True:
                out = self._sqs.list_queues(**kwargs)
                urls.extend(out.get("QueueUrls", []))
                if not out.get("NextToken"):
                    break
                kwargs["NextToken"] = out["NextToken"]
        for url in urls:
            self._urls[url.rsplit("/", 1)[-1]] = url

        def info(url: str) -> QueueInfo | None:
            try:
                return self._info(url.rsplit("/", 1)[-1], url)
            except NotFoundError:  # deleted since it was listed
                return None

        # One GetQueueAttributes per queue: 20,000 of them for 10,000 triggers, read
        # LIST_WORKERS at a time so that the reconciler's whole-account look fits its timeout.
        workers = max(1, min(LIST_WORKERS, len(urls)))
        with ThreadPoolExecutor(workers, thread_name_prefix="sqs-list") as pool:
            found = [q for q in pool.map(info, urls) if q is not None]
        return sorted(found, key=lambda q: q.name)

    def set_attributes(self, name: str, attributes: Mapping[str, str]) -> None:
        with translated(f"set attributes {name}"):
            self._sqs.set_queue_attributes(QueueUrl=self._url(name), Attributes=dict(attributes))

    def delete(self, name: str) -> None:
        try:
            url = self._url(name)
        except NotFoundError:
            return
        with translated(f"delete queue {name}"):
            self._sqs.delete_queue(QueueUrl=url)
        self._urls.pop(name, None)

    def send_batch(self, name: str, messages: Sequence[OutgoingMessage]) -> builtins.list[str]:
        entries = [_entry(m) for m in messages]
        try:
            with translated(f"send to {name}"):
                out = self._sqs.send_message_batch(QueueUrl=self._url(name), Entries=entries)
        except NotFoundError:
            self._urls.pop(name, None)  # a queue of the same name, made again, is found again
            raise
        return [f["Id"] for f in out.get("Failed", [])]

    def receive(
        self, name: str, max_messages: int, wait_seconds: int, visibility_timeout: int | None
    ) -> builtins.list[ReceivedMessage]:
        kwargs: dict[str, Any] = {
            "QueueUrl": self._url(name),
            "MaxNumberOfMessages": max_messages,
            "WaitTimeSeconds": wait_seconds,
            "MessageSystemAttributeNames": ["All"],
            "MessageAttributeNames": ["All"],
        }
        if visibility_timeout is not None:
            kwargs["VisibilityTimeout"] = visibility_timeout
        with translated(f"receive from {name}"):
            out = self._sqs.receive_message(**kwargs)
        return [
            ReceivedMessage(
                message_id=m["MessageId"],
                receipt_handle=m["ReceiptHandle"],
                body=m["Body"],
                attributes=m.get("Attributes", {}),
                message_attributes={
                    k: v["StringValue"]
                    for k, v in m.get("MessageAttributes", {}).items()
                    if "StringValue" in v
                },
            )
            for m in out.get("Messages", [])
        ]

    def delete_message(self, name: str, receipt_handle: str) -> None:
        with translated(f"delete message from {name}"):
            self._sqs.delete_message(QueueUrl=self._url(name), ReceiptHandle=receipt_handle)

    def change_visibility(self, name: str, receipt_handle: str, timeout: int) -> None:
        with translated(f"change visibility in {name}"):
            self._sqs.change_message_visibility(
                QueueUrl=self._url(name), ReceiptHandle=receipt_handle, VisibilityTimeout=timeout
            )

    def purge(self, name: str) -> None:
        with translated(f"purge {name}"):
            self._sqs.purge_queue(QueueUrl=self._url(name))

    def depth(self, name: str) -> int:
        with translated(f"depth of {name}"):
            attrs = self._sqs.get_queue_attributes(
                QueueUrl=self._url(name),
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )["Attributes"]
        return sum(int(v) for v in attrs.values())


def fifo_parameters(group_id: str | None, dedup_id: str | None) -> dict[str, str]:
    """A FIFO message's group and deduplication ids as SQS SendMessage (and SNS Publish) name
    them; none that are not set."""
    named = (("MessageGroupId", group_id), ("MessageDeduplicationId", dedup_id))
    return {name: value for name, value in named if value is not None}


def _entry(m: OutgoingMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {"Id": m.id, "MessageBody": m.body}
    if m.delay_seconds:  # not even 0 on a FIFO queue, which refuses the parameter
        entry["DelaySeconds"] = m.delay_seconds
    entry.update(fifo_parameters(m.group_id, m.dedup_id))
    if m.message_attributes:
        entry["MessageAttributes"] = {
            k: {"DataType": "String", "StringValue": v} for k, v in m.message_attributes.items()
        }
    return entry
