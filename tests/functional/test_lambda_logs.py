"""What the five functions print on Lambda (design.md §4): one JSON object a line, with the Lambda
context, the X-Ray trace id, and the event id / trigger / attempt on a delivery line.

Each run is a fresh interpreter with the environment Lambda gives a function, since app.py decides
at import (chalicelib/logs.py): it imports app, puts the in-memory container in, invokes every
entry point as Lambda would (its event, a Lambda context) and the test reads its stdout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chalicelib.config import APP_NAME

REPO = Path(__file__).resolve().parents[2]
XRAY_ROOT = "1-5759e988-bd862e3fe1be46a994272793"
EVENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
API_REQUEST_ID = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"
MSK_ARN = (
    "arn:aws:kafka:us-east-1:123456789012:cluster/demo-cluster/"
    "751d2973-a626-431c-9d4e-d7975eb44dd7-2"
)
FUNCTIONS = ("api_handler", "delivery", "dead_letter", "kafka_ingress", "reconciler")


def function_name(fn: str) -> str:
    # Chalice names the API handler <app>-<stage>, the others <app>-<stage>-<function>.
    return f"{APP_NAME}-prod" if fn == "api_handler" else f"{APP_NAME}-prod-{fn}"


def _api_event(path: str, headers: dict[str, str], body: str) -> dict[str, Any]:
    namespace, broker = path.strip("/").split("/")
    return {
        "resource": "/{namespace}/{broker}",
        "path": path,
        "httpMethod": "POST",
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"namespace": namespace, "broker": broker},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{namespace}/{broker}",
            "httpMethod": "POST",
            "path": f"/api{path}",
            "stage": "api",
            "requestId": API_REQUEST_ID,
            "identity": {"sourceIp": "192.0.2.1"},
        },
        "body": body,
        "isBase64Encoded": False,
    }


def scenario() -> None:
    """Run in the child interpreter: one invocation of each function, each logging something."""
    import app
    from brokerctl.dev import scheduled_event
    from brokerctl.lambda_context import LocalLambdaContext
    from chalicelib.container import use_container
    from chalicelib.ports import HttpResponse
    from tests.functional.harness import Harness

    def context(fn: str) -> LocalLambdaContext:
        return LocalLambdaContext(function_name(fn))

    # The subscriber fails, the dead-letter sink takes the event.
    h = Harness(HttpResponse(500, {}, b"down"), HttpResponse(202, {}, b""))
    use_container(h.container)
    h.broker()
    sink = {"retry": 0, "deadLetterSink": {"uri": "http://sink.example/"}}
    h.trigger("orders", delivery=sink)
    h.trigger("audit")
    h.broker(name="from-kafka")  # no triggers: the Kafka records stop there
    source = {
        "metadata": {"name": "orders"},
        "spec": {
            "mskClusterArn": MSK_ARN,
            "topics": ["orders"],
            "sink": {"ref": {"kind": "Broker", "name": "from-kafka"}},
        },
    }
    h.container.kafka_sources.put("ns", "orders", source)
    h.queues.delete(h.queue_of("audit"))  # its trigger deleted behind this container's back

    # kafka_ingress: two of the fixture's records are not CloudEvents (warnings).
    msk = json.loads((REPO / "tests" / "fixtures" / "kafka" / "msk_event.json").read_text())
    app.kafka_ingress(msk, context("kafka_ingress"))
    # api_handler: an event whose extension traceparent names its trace; audit's queue is gone.
    headers = {
        "content-type": "text/plain",
        "ce-specversion": "1.0",
        "ce-id": "e-42",
        "ce-source": "/shop",
        "ce-type": "order.created",
        "ce-traceparent": f"00-{EVENT_TRACE}-00f067aa0ba902b7-01",
    }
    answer = app.app(_api_event("/ns/default", headers, "hi"), context("api_handler"))
    assert answer["statusCode"] == 202, answer
    # delivery: 500, no retries: dead-lettered. dead_letter: the sink takes it.
    app.delivery(h.sqs_event(h.queue_of("orders")), context("delivery"))
    app.dead_letter(h.sqs_event(h.dlq_of("orders")), context("dead_letter"))
    # reconciler: audit's queue is created again (drift repaired, a warning).
    app.reconciler(scheduled_event("us-east-1"), context("reconciler"))


def _run(level: str, **tracing: str) -> list[dict[str, Any]]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO),
        "AWS_DEFAULT_REGION": "us-east-1",
        # What Lambda sets (and the function's configuration, .chalice/config.json).
        "AWS_LAMBDA_FUNCTION_NAME": function_name("delivery"),
        "_X_AMZN_TRACE_ID": f"Root={XRAY_ROOT};Parent=53995c3f42cd8ad8;Sampled=1",
        "BROKER_STAGE": "prod",
        "BROKER_LOCAL_MODE": "false",
        "POWERTOOLS_SERVICE_NAME": APP_NAME,
        "POWERTOOLS_LOG_LEVEL": level,
        "POWERTOOLS_METRICS_NAMESPACE": "ServerlessBroker",
        "BROKER_METRICS_ENABLED": "false",
        # No X-Ray daemon here: the Tracer wraps every invocation and sends nothing.
        "POWERTOOLS_TRACE_DISABLED": "true",
        **tracing,
    }
    code = "from tests.functional.test_lambda_logs import scenario; scenario()"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert lines, out.stderr
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON log line: {line!r}")
    return parsed


@pytest.fixture(scope="module")
def info_lines() -> list[dict[str, Any]]:
    return _run("INFO")


def _of(lines: list[dict[str, Any]], fn: str) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("function_name") == function_name(fn)]


def test_every_function_logs_json_with_its_lambda_context(
    info_lines: list[dict[str, Any]],
) -> None:
    for fn in FUNCTIONS:
        lines = _of(info_lines, fn)
        assert lines, f"{fn} logged nothing"
        for line in lines:
            assert line["service"] == APP_NAME
            assert line["level"] in {"INFO", "WARNING", "ERROR"}
            assert str(line["name"]).startswith("broker.")
            assert line["function_request_id"] and "cold_start" in line
            assert line["function_arn"].endswith(f":function:{function_name(fn)}")
            assert line["xray_trace_id"] == XRAY_ROOT
    assert {line["function_name"] for line in info_lines} == {function_name(f) for f in FUNCTIONS}


def test_a_delivery_line_names_the_event_trigger_attempt_and_trace(
    info_lines: list[dict[str, Any]],
) -> None:
    [line, summary] = [d for d in _of(info_lines, "delivery") if d["name"] == "broker.delivery"]
    assert line["level"] == "INFO"
    assert (line["event_id"], line["trigger"], line["attempt"]) == ("e-42", "orders", 1)
    assert (line["namespace"], line["broker"]) == ("ns", "default")
    assert (line["status"], line["outcome"]) == (500, "dead_lettered")
    # The event's own trace (its traceparent extension) beside the function's X-Ray trace.
    assert (line["trace_id"], line["xray_trace_id"]) == (EVENT_TRACE, XRAY_ROOT)
    assert "hi" not in json.dumps(line)  # never the event data
    assert (summary["messages"], summary["back"]) == (1, 0)


def test_a_successful_delivery_writes_only_the_invocation_summary_at_info(
    info_lines: list[dict[str, Any]],
) -> None:
    # The sink took the dead letter: its line is DEBUG (CloudWatch Logs bills by the GB).
    [line] = [d for d in _of(info_lines, "dead_letter") if d["name"] == "broker.delivery"]
    assert line["level"] == "INFO" and "outcome" not in line
    assert line["message"] == "batch of 1, 0 back to the queue"
    assert line["function_request_id"] and line["xray_trace_id"] == XRAY_ROOT


def test_api_lines_carry_the_request_id_problem_documents_name(
    info_lines: list[dict[str, Any]],
) -> None:
    [line] = _of(info_lines, "api_handler")
    assert line["level"] == "WARNING" and "is gone" in line["message"]
    assert line["correlation_id"] == API_REQUEST_ID


def test_kafka_lines_name_the_source_and_record(info_lines: list[dict[str, Any]]) -> None:
    lines = _of(info_lines, "kafka_ingress")
    assert {(d["kafkasource"], d["record"]) for d in lines} == {
        ("orders", "orders-1@7"),
        ("orders", "orders-1@8"),
    }


def test_powertools_log_level_is_honoured() -> None:
    lines = _run("WARNING")
    assert lines and all(line["level"] != "INFO" for line in lines)
    assert {line["function_name"] for line in lines} >= {function_name("reconciler")}


@pytest.mark.skipif(
    importlib.util.find_spec("aws_xray_sdk") is None, reason="needs aws-xray-sdk (requirements-dev)"
)
def test_with_the_xray_sdk_every_invocation_is_a_subsegment_of_its_trace() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:  # what the X-Ray daemon reads
        daemon.bind(("127.0.0.1", 0))
        daemon.settimeout(2)
        address = f"127.0.0.1:{daemon.getsockname()[1]}"
        _run("WARNING", POWERTOOLS_TRACE_DISABLED="false", LAMBDA_TASK_ROOT=str(REPO),
             AWS_XRAY_DAEMON_ADDRESS=address)  # fmt: skip
        segments = []
        for _ in FUNCTIONS:
            header, body = daemon.recv(65536).decode().split("\n", 1)
            assert json.loads(header) == {"format": "json", "version": 1}
            segments.append(json.loads(body))
    for segment in segments:
        assert (segment["name"], segment["trace_id"]) == ("## lambda_handler", XRAY_ROOT)
        assert segment["annotations"]["Service"] == APP_NAME
        assert "metadata" not in segment  # no response captured: it may carry events
