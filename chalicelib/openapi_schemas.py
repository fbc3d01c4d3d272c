"""The schemas of the API's OpenAPI document (chalicelib/openapi.py): the resources, their specs
and the other bodies the API takes and answers, as far as a JSON Schema can say them; the parsers
in ``chalicelib/core`` remain the authority."""

from __future__ import annotations

from typing import Any

from chalicelib.core.names import MAX_NAME_LENGTH
from chalicelib.core.resources.delivery_spec import MAX_AUDIENCE_CHARS, MAX_CA_CERTS_BYTES
from chalicelib.core.resources.event_policy import SENDER_KINDS

_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str] | None = None, /, **props: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


def _resource(api_version: str, kind: str, required: list[str], spec: Any) -> dict[str, Any]:
    """A resource in the Kubernetes shape: apiVersion, kind, metadata and this spec."""
    return _obj(
        required,
        apiVersion={"const": api_version},
        kind={"const": kind},
        metadata=ref("ObjectMeta"),
        spec=spec,
    )


def _described(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "description": description}


STRING = {"type": "string"}
_STRING_MAP = {"type": "object", "additionalProperties": STRING}
_DURATION = {"type": "string", "description": "ISO 8601 duration, e.g. PT0.2S"}
_URI = {"type": "string", "format": "uri"}
_DESTINATION = _obj(
    uri=_URI,
    ref=_obj(
        ["name"],
        apiVersion=STRING,
        kind=STRING,
        name=STRING,
        namespace=STRING,
    ),
    audience={
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_AUDIENCE_CHARS,
        "description": "requests carry Authorization: Bearer <JWT> with this aud, signed by "
        "the broker (keys at /.well-known/jwks.json); http(s) uri only",
    },
    CACerts={
        "type": "string",
        "maxLength": MAX_CA_CERTS_BYTES,
        "description": "PEM CA certificates its TLS trusts besides the system's; https uri only",
    },
)
_SECRET_REF = _described(
    "a Secrets Manager secret under the stage's connection secret prefix",
    _obj(["arn"], arn=STRING),
)

# A PingSource's or IntegrationSource's spec.sink (core/resources/source_sink.py).
_SOURCE_SINK = _described(
    "ref to a Broker of the namespace, or uri",
    _obj(
        ref=_obj(
            ["kind", "name"],
            apiVersion=STRING,
            kind={"const": "Broker"},
            name=ref("Name"),
            namespace=STRING,
        ),
        uri=_URI,
    ),
)

SCHEMAS: dict[str, Any] = {
    "Problem": _described(
        "RFC 9457 problem details; `errors` names every invalid field at once",
        _obj(
            ["type", "title", "status", "detail"],
            type=STRING,
            title=STRING,
            status={"type": "integer", "minimum": 400, "maximum": 599},
            detail=STRING,
            errors={
                "type": "array",
                "items": _obj(["field", "message"], field=STRING, message=STRING),
            },
            correlationId=STRING,
        ),
    ),
    "Name": {"type": "string", "pattern": _LABEL, "maxLength": MAX_NAME_LENGTH},
    "ObjectMeta": _obj(
        name=ref("Name"),
        namespace=STRING,
        labels=_STRING_MAP,
        annotations=_STRING_MAP,
        resourceVersion=STRING,
    ),
    "Delivery": _obj(
        retry={"type": "integer", "minimum": 0},
        backoffPolicy={"enum": ["exponential", "linear"]},
        backoffDelay=_DURATION,
        timeout=_DURATION,
        retryAfterMax=_DURATION,
        deadLetterSink=_DESTINATION,
        format={"enum": ["json", "binary"]},
    ),
    "BrokerSpec": _obj(delivery=ref("Delivery"), config={"type": "object"}),
    "Broker": _resource("eventing.knative.dev/v1", "Broker", ["metadata"], ref("BrokerSpec")),
    "Filter": _described(
        "exactly one dialect per element",
        _obj(
            exact=_STRING_MAP,
            prefix=_STRING_MAP,
            suffix=_STRING_MAP,
            all={"type": "array", "items": ref("Filter")},
            any={"type": "array", "items": ref("Filter")},
            **{"not": ref("Filter")},  # a Python keyword, so not a keyword argument
            cesql=STRING,
            eventPattern={
                "type": "object",
                "description": "an EventBridge event pattern over the event's JSON form "
                "(attributes top level, JSON data under data); see docs/filters.md",
            },
        ),
    ),
    "TriggerSpec": _obj(
        ["subscriber"],
        broker=ref("Name"),
        filter=_obj(attributes=_STRING_MAP),
        filters={"type": "array", "items": ref("Filter")},
        subscriber=_DESTINATION,
        delivery=ref("Delivery"),
    ),
    "Trigger": _resource(
        "eventing.knative.dev/v1", "Trigger", ["metadata", "spec"], ref("TriggerSpec")
    ),
    "EventTransform": _resource(
        "eventing.knative.dev/v1alpha1",
        "EventTransform",
        ["metadata", "spec"],
        _obj(
            ["jsonata"],
            jsonata=_obj(["expression"], expression={"type": "string", "minLength": 1}),
            sink=_DESTINATION,
            reply=_obj(
                jsonata=_obj(["expression"], expression={"type": "string", "minLength": 1}),
                discard={"type": "boolean"},
            ),
        ),
    ),
    "IntegrationSink": _resource(
        "sinks.knative.dev/v1alpha1",
        "IntegrationSink",
        ["metadata", "spec"],
        _described(
            "exactly one of aws.sqs, aws.sns, aws.s3, aws.eventbridge, log",
            _obj(
                aws=_obj(
                    sqs=ref("AwsSinkTarget"),
                    sns=ref("AwsSinkTarget"),
                    s3=ref("AwsSinkTarget"),
                    eventbridge=ref("AwsSinkTarget"),
                    auth=_obj(secret=_obj(ref=_obj(name=STRING))),
                ),
                log=_obj(
                    loggerName=STRING,
                    level={"enum": ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF"]},
                    marker=STRING,
                    showHeaders={"type": "boolean"},
                    showBody={"type": "boolean"},
                    multiline={"type": "boolean"},
                    logMask={"type": "boolean"},
                ),
            ),
        ),
    ),
    "AwsSinkTarget": _obj(["arn", "region"], arn=STRING, region=STRING),
    "Connection": _resource(
        "serverless-broker.dev/v1alpha1",
        "Connection",
        ["metadata", "spec"],
        _obj(
            ["auth"],
            auth=_described(
                "exactly one of apiKey, basic, oauthClientCredentials, awsSigV4",
                _obj(
                    apiKey=_obj(["header", "secretRef"], header=STRING, secretRef=_SECRET_REF),
                    basic=_obj(["secretRef"], secretRef=_SECRET_REF),
                    oauthClientCredentials=_obj(
                        ["tokenUrl", "clientId", "clientSecretRef"],
                        tokenUrl=_URI,
                        clientId=STRING,
                        clientSecretRef=_SECRET_REF,
                        scope=STRING,
                    ),
                    awsSigV4=_obj(["service", "region"], service=STRING, region=STRING),
                ),
            ),
        ),
    ),
    "PingSource": _resource(
        "sources.knative.dev/v1",
        "PingSource",
        ["metadata", "spec"],
        _obj(
            ["sink"],
            schedule=_described(
                '5-field cron (default "* * * * *"), optionally "CRON_TZ=<zone> " first; what '
                "EventBridge Scheduler cannot run (both day fields, seconds) is a 400",
                {"type": "string", "maxLength": 256},
            ),
            timezone=_described("an IANA time zone", {"type": "string", "maxLength": 50}),
            contentType=STRING,
            data=_described("the payload (or dataBase64)", {"type": "string", "maxLength": 65536}),
            dataBase64={"type": "string", "maxLength": 65536},
            ceOverrides=_obj(extensions=_STRING_MAP),
            sink=_SOURCE_SINK,
        ),
    ),
    "IntegrationSource": _resource(
        "sources.knative.dev/v1alpha1",
        "IntegrationSource",
        ["metadata", "spec"],
        _obj(
            ["sink"],
            timer=_described(
                "exactly one of timer and aws; a deployed stage runs whole minutes only",
                _obj(
                    ["period", "message"],
                    period=_described(
                        "milliseconds, whole seconds", {"type": "integer", "minimum": 1000}
                    ),
                    message={"type": "string", "maxLength": 65536},
                    contentType=STRING,
                ),
            ),
            aws=_described(
                "exactly one of sqs, s3 and ddbStreams",
                _obj(
                    sqs=_obj(["arn"], arn=STRING, region=STRING),
                    s3=_obj(["arn"], arn=STRING, region=STRING),
                    ddbStreams=_obj(["table"], table=STRING, region=STRING),
                ),
            ),
            sink=_SOURCE_SINK,
        ),
    ),
    "KafkaSource": _resource(
        "sources.knative.dev/v1",
        "KafkaSource",
        ["metadata", "spec"],
        _obj(
            ["bootstrapServers", "topics", "sink"],
            bootstrapServers={"type": "array", "items": STRING},
            topics={"type": "array", "items": STRING},
            consumerGroup=STRING,
            initialOffset={"enum": ["earliest", "latest"]},
            sink=_DESTINATION,
            delivery=ref("Delivery"),
        ),
    ),
    "Replay": _resource(
        "eventing.knative.dev/v1",
        "Replay",
        ["spec"],
        _obj(
            ["from", "to"],
            **{
                "from": {"type": "string", "format": "date-time", "description": "inclusive"},
                "to": {"type": "string", "format": "date-time", "description": "exclusive"},
            },
            triggers={"type": "array", "items": ref("Name")},
            filters={"type": "array", "items": ref("Filter")},
            packing={
                "type": "boolean",
                "default": False,
                "description": "many events to an SQS message on standard queues (fewer calls)",
            },
        ),
    ),
    "Resource": _obj(
        ["apiVersion", "kind", "metadata"],
        apiVersion=STRING,
        kind=STRING,
        metadata=_obj(["name"], name=STRING, uid=STRING),
        spec={"type": "object"},
        status=_obj(conditions={"type": "array", "items": {"type": "object"}}),
    ),
    "ResourceList": _obj(
        ["items"],
        apiVersion=STRING,
        kind=STRING,
        items={"type": "array", "items": ref("Resource")},
    ),
    "Status": _obj(["kind", "status"], kind={"const": "Status"}, status=STRING),
    "CloudEvent": _described(
        "a structured-mode CloudEvent (JSON format)",
        _obj(
            ["specversion", "id", "source", "type"],
            specversion=STRING,
            id=STRING,
            source=STRING,
            type=STRING,
        ),
    ),
    "Object": {"type": "object"},
    "FilterTest": _obj(
        ["event"],
        event={"type": "object", "description": "a CloudEvent in JSON format"},
        filters={"type": "array", "items": ref("Filter")},
        filter=_obj(attributes=_STRING_MAP),
        trigger=ref("Name"),
    ),
    "EventPolicy": _resource(
        "eventing.knative.dev/v1alpha1",
        "EventPolicy",
        ["metadata"],
        _obj(
            to={
                "type": "array",
                "description": "the brokers it applies to; none: every broker of the namespace",
                "items": _obj(
                    ref=_obj(
                        ["apiVersion", "kind", "name"],
                        apiVersion=STRING,
                        kind={"const": "Broker"},
                        name=ref("Name"),
                    ),
                    selector=_obj(
                        apiVersion=STRING,
                        kind={"const": "Broker"},
                        matchLabels=_STRING_MAP,
                        matchExpressions={
                            "type": "array",
                            "items": _obj(
                                ["key", "operator"],
                                key=STRING,
                                operator={"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                                values={"type": "array", "items": STRING},
                            ),
                        },
                    ),
                ),
            },
            **{  # a Python keyword, so not a keyword argument
                "from": {
                    "type": "array",
                    "items": _obj(
                        sub=_described(
                            "a sender identity (token:{ns}:{id}, an IAM ARN, "
                            "source:{ns}:{kind}:{name}, trigger:{ns}:{name}); '*' only last",
                            {"type": "string", "minLength": 1, "maxLength": 2048},
                        ),
                        ref=_obj(
                            ["apiVersion", "kind", "name"],
                            apiVersion=STRING,
                            kind={"enum": list(SENDER_KINDS)},
                            name=ref("Name"),
                            namespace=ref("Name"),
                        ),
                    ),
                }
            },
            filters={"type": "array", "items": ref("Filter")},
        ),
    ),
    "PolicyTest": _obj(
        ["event"],
        broker=ref("Name"),
        identity={"type": ["string", "null"], "description": "null: an anonymous sender"},
        event={"type": "object", "description": "a CloudEvent in JSON format"},
    ),
    "PolicyVerdict": _obj(
        ["allowed", "decision", "reason", "policies"],
        allowed={"type": "boolean"},
        policy={"type": ["string", "null"]},
        decision=STRING,
        reason=STRING,
        policies={"type": "array", "items": STRING},
    ),
    "FilterVerdict": _obj(
        ["matched", "reasons"],
        matched={"type": "boolean"},
        reasons={"type": "array", "items": STRING},
        trigger=ref("Name"),
    ),
}
