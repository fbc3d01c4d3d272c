"""The pure parts of IntegrationSink targets (docs/targets.md): the log sink's address and line
(bounded, masked when asked), S3 object keys (one per event, the same for every attempt), S3
bucket ARNs, and the IAM statements an S3 pattern generates."""

from __future__ import annotations

import logging

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.delivery import log_sink
from chalicelib.core.delivery.aws_targets import object_key, parse_arn
from infra import target_policy

EVENT = CloudEvent(
    {"specversion": "1.0", "id": "e1", "source": "/s", "type": "t", "apitoken": "hush"},
    json_data={"user": "ann", "password": "hunter2", "items": [{"api_key": "k"}]},
)


def test_a_log_uri_names_its_options_and_reads_back() -> None:
    spec = log_sink.LogSpec("orders", "WARN", show_headers=True, marker="m1")
    uri = spec.uri()
    assert uri == (
        "log:orders?level=WARN&showHeaders=true&showBody=true&multiline=false&logMask=false"
        "&marker=m1"
    )
    assert log_sink.parse_uri(uri) == spec
    for bad in ("log:a b?level=INFO", "log:x?level=LOUD", "http://x", "log:x?marker=a%20b"):
        assert log_sink.parse_uri(bad) is None, bad


def test_the_line_has_the_event_its_attributes_and_data_as_asked() -> None:
    line = log_sink.line(log_sink.LogSpec(show_headers=True), EVENT, "tr")
    assert line is not None and line.level == logging.INFO
    assert line.keys["event_id"] == "e1" and line.keys["trigger"] == "tr"
    assert line.keys["attributes"]["apitoken"] == "hush"
    assert '"password": "hunter2"' in line.keys["data"]
    assert line.message.startswith("event e1 of type t from /s, attributes: ")
    bare = log_sink.line(log_sink.LogSpec(show_body=False), EVENT, "tr")
    assert bare is not None and "data" not in bare.keys and "attributes" not in bare.keys
    assert log_sink.line(log_sink.LogSpec(level="OFF"), EVENT, "tr") is None


def test_log_mask_hides_credential_like_keys_in_attributes_and_json_data() -> None:
    spec = log_sink.LogSpec(show_headers=True, log_mask=True, multiline=True)
    line = log_sink.line(spec, EVENT, "tr")
    assert line is not None
    assert line.keys["attributes"]["apitoken"] == log_sink.MASK
    assert "hunter2" not in line.message and '"api_key": "xxxxx"' in line.keys["data"]
    assert line.message.count("\n") == 2  # one part a line
    binary = CloudEvent(
        {"specversion": "1.0", "id": "e", "source": "/s", "type": "t",
         "datacontenttype": "application/json"},
        data=b'{"secret": 1}',
    )  # fmt: skip
    masked = log_sink.line(spec, binary, "tr")
    assert masked is not None and masked.keys["data"] == '{"secret": "xxxxx"}'


def test_the_line_is_bounded() -> None:
    big = CloudEvent(
        {"specversion": "1.0", "id": "i" * 5000, "source": "/s", "type": "t"},
        data=b"x" * 100_000,
    )
    line = log_sink.line(log_sink.LogSpec(), big, "tr")
    assert line is not None
    assert len(line.keys["event_id"]) == log_sink.MAX_VALUE_CHARS
    assert len(line.keys["data"]) == log_sink.MAX_DATA_CHARS and line.keys["data_truncated"]
    assert len(line.message) < 2 * log_sink.MAX_DATA_CHARS


def test_an_s3_key_is_the_arrival_hour_and_a_hash_of_source_and_id() -> None:
    key = object_key("/s", "e1", "2026-11-28T22:07:01.5Z")
    assert key.startswith("2026/11/28/22/") and key.endswith(".json")
    assert object_key("/s", "e1", "2026-11-28T22:07:01.5Z") == key  # every attempt
    assert object_key("/s", "e2", "2026-11-28T22:07:01.5Z") != key
    assert object_key("/s1", "e", None) != object_key("/s", "1e", None)
    assert object_key("/s", "e1", None).startswith("undated/")


def test_s3_arns_name_a_bucket_without_region_or_account() -> None:
    target = parse_arn("arn:aws:s3:::my-bucket")
    assert target is not None and (target.service, target.name, target.region) == (
        "s3",
        "my-bucket",
        "",
    )
    assert parse_arn("arn:aws:s3:us-east-1:123456789012:my-bucket") is None
    assert parse_arn("arn:aws:sqs:::q") is None  # other services name both


def test_an_s3_pattern_grants_put_object_on_its_objects_and_list_bucket_on_it() -> None:
    [deliver] = target_policy.statements(["arn:aws:s3:::events-*"], "deliver")
    assert deliver["Action"] == ["s3:PutObject"]
    assert deliver["Resource"] == ["arn:aws:s3:::events-*/*"]
    [check] = target_policy.statements(["arn:aws:s3:::events-*"], "check")
    assert (check["Action"], check["Resource"]) == (["s3:ListBucket"], ["arn:aws:s3:::events-*"])
