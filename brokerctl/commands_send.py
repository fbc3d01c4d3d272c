"""``brokerctl send``: one CloudEvent to a broker's ingress, in binary or structured mode."""

from __future__ import annotations

import argparse
import base64
import json
import mimetypes
import os
import sys
import uuid
from typing import Any
from urllib.parse import quote

from brokerctl import output
from brokerctl.client import BrokerClient, UsageError
from brokerctl.commands_common import command, connection_options, key_value, show
from chalicelib.core.cloudevents.percent_encoding import encode_header_value

# Attributes with their own flags; an --extension may not shadow them.
_OWN_FLAGS = {"specversion", "id", "source", "type", "datacontenttype", "data", "data_base64"}


def add_send_parser(sub: Any) -> None:
    send = sub.add_parser(
        "send",
        parents=[connection_options()],
        help="send a CloudEvent to a broker",
        description="Binary mode (ce-* headers) unless --structured. The content type defaults "
        "to application/json when the data parses as JSON, else text/plain (--data) or a guess "
        "from the file name (--data-file).",
    )
    send.add_argument("--broker", default="default", help="broker name (default: default)")
    send.add_argument("--type", required=True, help="ce-type")
    send.add_argument("--source", required=True, help="ce-source (a URI-reference)")
    send.add_argument("--id", help="ce-id (default: a random UUID)")
    send.add_argument("--subject", help="ce-subject")
    data = send.add_mutually_exclusive_group()
    data.add_argument("--data", help="event data as text")
    data.add_argument("--data-file", metavar="PATH", help="event data from a file (- for stdin)")
    send.add_argument("--content-type", help="datacontenttype of the data")
    send.add_argument(
        "--extension",
        type=key_value,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extension (or optional) attribute, repeatable",
    )
    send.add_argument(
        "--structured", action="store_true", help="application/cloudevents+json instead of binary"
    )
    send.add_argument(
        "--token",
        default=os.environ.get("BROKERCTL_TOKEN"),
        help="ingress bearer token (env BROKERCTL_TOKEN)",
    )
    send.set_defaults(func=command(_send))


def _is_json(media_type: str) -> bool:
    media = media_type.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _parses_as_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def read_data(args: argparse.Namespace) -> tuple[bytes | None, str | None]:
    """The data bytes and their content type (given, or inferred as the help text says)."""
    if args.data is not None:
        data = args.data.encode("utf-8")
        guess = "text/plain; charset=utf-8"
    elif args.data_file is not None:
        try:
            if args.data_file == "-":
                data = sys.stdin.buffer.read()
            else:
                with open(args.data_file, "rb") as f:
                    data = f.read()
        except OSError as exc:
            raise UsageError(f"--data-file: {exc.strerror}: {args.data_file}") from None
        guess = mimetypes.guess_type(args.data_file)[0] or "application/octet-stream"
    else:
        return None, args.content_type
    if args.content_type:
        return data, args.content_type
    return data, "application/json" if _parses_as_json(data) else guess


def event_attributes(args: argparse.Namespace) -> dict[str, str]:
    attributes = {
        "specversion": "1.0",
        "id": args.id or str(uuid.uuid4()),
        "source": args.source,
        "type": args.type,
    }
    if args.subject is not None:
        attributes["subject"] = args.subject
    for name, value in args.extension:
        if name.lower() in _OWN_FLAGS:
            raise UsageError(f"--extension {name}: use the dedicated option for {name!r}")
        attributes[name] = value
    return attributes


def binary_request(
    attributes: dict[str, str], data: bytes | None, content_type: str | None
) -> tuple[dict[str, str], bytes]:
    # Header values are percent-encoded per the CloudEvents 1.0.2 HTTP binding.
    headers = {f"ce-{k}": encode_header_value(v) for k, v in attributes.items()}
    if content_type:
        headers["content-type"] = content_type
    return headers, data or b""


def structured_request(
    attributes: dict[str, str], data: bytes | None, content_type: str | None
) -> tuple[dict[str, str], bytes]:
    doc: dict[str, Any] = dict(attributes)
    if content_type:
        doc["datacontenttype"] = content_type
    if data is not None:
        if content_type and _is_json(content_type):
            try:
                doc["data"] = json.loads(data)
            except ValueError:
                raise UsageError(f"the data is not valid JSON, yet typed {content_type}") from None
        else:
            try:
                doc["data"] = data.decode("utf-8")
            except UnicodeDecodeError:
                doc["data_base64"] = base64.b64encode(data).decode("ascii")
    body = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    return {"content-type": "application/cloudevents+json; charset=utf-8"}, body


def _send(args: argparse.Namespace, client: BrokerClient) -> None:
    attributes = event_attributes(args)
    data, content_type = read_data(args)
    encode = structured_request if args.structured else binary_request
    headers, body = encode(attributes, data, content_type)
    if args.token:
        headers["authorization"] = f"Bearer {args.token}"
    path = f"/{quote(client.target.namespace, safe='')}/{quote(args.broker, safe='')}"
    response = client.send_event(path, headers, body)
    result = {"id": attributes["id"], "broker": args.broker, "status": response.status_code}
    show(
        args,
        result,
        lambda: output.say(
            f"Event {attributes['id']!r} accepted by broker {args.broker!r} "
            f"(HTTP {response.status_code})."
        ),
    )
