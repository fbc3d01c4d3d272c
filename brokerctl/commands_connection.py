"""``brokerctl connection create|list|describe|delete``: Connections, how delivery authenticates
to an HTTP API (docs/targets.md, Connections). The secrets stay in Secrets Manager: the commands
name them by ARN and never read them."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from brokerctl import output
from brokerctl.client import BrokerClient, UsageError
from brokerctl.commands_common import command, connection_options, show

API_VERSION = "serverless-broker.dev/v1alpha1"
API = f"/apis/{API_VERSION}/namespaces"


def add_connection_parser(sub: Any) -> None:
    conn = connection_options()
    connection = sub.add_parser(
        "connection", help="manage connections (how delivery authenticates to an HTTP API)"
    )
    verbs = connection.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser(
        "create",
        parents=[conn],
        help="create or replace a connection",
        description="A trigger uses it with --connection NAME (annotation "
        "serverless-broker/connection). Secrets are named by their Secrets Manager ARN, under "
        "the stage's prefix serverless-broker/<stage>/connections/.",
    )
    create.add_argument("name")
    kind = create.add_mutually_exclusive_group(required=True)
    kind.add_argument("--api-key", metavar="HEADER", help="send the secret string in this header")
    kind.add_argument(
        "--basic", action="store_true", help='basic auth from a secret {"username", "password"}'
    )
    kind.add_argument(
        "--oauth",
        metavar="TOKEN_URL",
        help="OAuth 2.0 client credentials from this token endpoint (with --client-id)",
    )
    kind.add_argument(
        "--aws-sigv4",
        metavar="SERVICE",
        help="sign with AWS SigV4 for this service (lambda, execute-api, vpc-lattice-svcs)",
    )
    create.add_argument(
        "--secret-arn",
        metavar="ARN",
        help="the secret: the API key, the basic credentials or the OAuth client secret",
    )
    create.add_argument("--client-id", help="the OAuth client id (with --oauth)")
    create.add_argument("--scope", help="the OAuth scope to ask for (with --oauth)")
    create.add_argument("--region", help="the AWS region to sign for (with --aws-sigv4)")
    create.set_defaults(func=command(_create))

    ls = verbs.add_parser("list", parents=[conn], help="list connections")
    ls.set_defaults(func=command(_list))

    describe = verbs.add_parser("describe", parents=[conn], help="show a connection's status")
    describe.add_argument("name")
    describe.set_defaults(func=command(_describe))

    delete = verbs.add_parser("delete", parents=[conn], help="delete a connection")
    delete.add_argument("name")
    delete.set_defaults(func=command(_delete))


def path(client: BrokerClient, *parts: str) -> str:
    tail = "/".join(quote(p, safe="") for p in parts)
    return f"{API}/{quote(client.target.namespace, safe='')}/{tail}"


def auth_body(args: argparse.Namespace) -> dict[str, Any]:
    """``spec.auth`` from the flags; a usage error names the flags a kind needs or refuses."""
    needs = {
        "api_key": ("secret_arn",),
        "basic": ("secret_arn",),
        "oauth": ("secret_arn", "client_id"),
        "aws_sigv4": ("region",),
    }
    chosen = next(k for k in needs if getattr(args, k))
    flag = f"--{chosen.replace('_', '-')}"
    missing = [f"--{n.replace('_', '-')}" for n in needs[chosen] if not getattr(args, n)]
    allowed = {*needs[chosen], *(("scope",) if chosen == "oauth" else ())}
    extra = [
        f"--{n.replace('_', '-')}"
        for n in ("secret_arn", "client_id", "scope", "region")
        if getattr(args, n) and n not in allowed
    ]
    if missing or extra:
        said = [f"needs {', '.join(missing)}"] if missing else []
        said += [f"does not take {', '.join(extra)}"] if extra else []
        raise UsageError(f"{flag} {' and '.join(said)}")
    secret_ref = {"arn": args.secret_arn}
    if chosen == "api_key":
        return {"apiKey": {"header": args.api_key, "secretRef": secret_ref}}
    if chosen == "basic":
        return {"basic": {"secretRef": secret_ref}}
    if chosen == "oauth":
        oauth = {"tokenUrl": args.oauth, "clientId": args.client_id, "clientSecretRef": secret_ref}
        return {
            "oauthClientCredentials": {**oauth, **({"scope": args.scope} if args.scope else {})}
        }
    return {"awsSigV4": {"service": args.aws_sigv4, "region": args.region}}


def _create(args: argparse.Namespace, client: BrokerClient) -> None:
    body = {
        "apiVersion": API_VERSION,
        "kind": "Connection",
        "metadata": {"name": args.name},
        "spec": {"auth": auth_body(args)},
    }
    doc = client.put(path(client, "connections", args.name), body)
    said = f"Connection {args.name!r} saved in namespace {client.target.namespace!r}."
    show(args, doc, lambda: output.say(f"{said} Ready: {output.ready(doc)}"))


def _list(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(path(client, "connections"))
    items = doc.get("items") or []
    rows = [
        (
            (c.get("metadata") or {}).get("name", ""),
            _kind(c),
            output.ready(c),
            output.age((c.get("metadata") or {}).get("creationTimestamp")),
        )
        for c in items
    ]
    empty = f"No connections in namespace {client.target.namespace!r}."
    show(args, doc, lambda: output.table(("NAME", "AUTH", "READY", "AGE"), rows, empty=empty))


def _describe(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.get(path(client, "connections", args.name))
    show(args, doc, lambda: _describe_text(doc))


def _describe_text(doc: Mapping[str, Any]) -> None:
    meta = doc.get("metadata") or {}
    output.say(f"{'Name:':<14}{meta.get('name', '')}")
    output.say(f"{'Namespace:':<14}{meta.get('namespace', '')}")
    output.say(f"{'Auth:':<14}{_kind(doc)}")
    auth = ((doc.get("spec") or {}).get("auth") or {}).get(_kind(doc)) or {}
    for key, value in auth.items():
        shown = value.get("arn") if isinstance(value, Mapping) else value
        output.say(f"  {key + ':':<12}{shown}")
    output.conditions_table(doc)


def _kind(doc: Mapping[str, Any]) -> str:
    auth = (doc.get("spec") or {}).get("auth") or {}
    return next(iter(auth), "")


def _delete(args: argparse.Namespace, client: BrokerClient) -> None:
    doc = client.delete(path(client, "connections", args.name))
    said = f"Connection {args.name!r} deleted in namespace {client.target.namespace!r}."
    show(args, doc, lambda: output.say(said))
