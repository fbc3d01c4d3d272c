"""What ``brokerctl pingsource`` and ``brokerctl integrationsource`` share (docs/sources.md): the
``--sink`` flag (``broker:NAME``, kn's form, or a URL), and the verbs, which differ only in the
body ``create`` sends, the list's second column and the fields ``describe`` shows."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from brokerctl import output
from brokerctl.client import BrokerClient, UsageError
from brokerctl.commands_common import command, show

BROKER_PREFIX = "broker:"

Doc = Mapping[str, Any]


def sink_of(text: str) -> dict[str, Any]:
    """``broker:NAME`` (kn's form) or an http(s) URL."""
    if text.startswith(BROKER_PREFIX):
        name = text[len(BROKER_PREFIX) :]
        if not name:
            raise UsageError("--sink broker:NAME needs the broker's name")
        return {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": name}}
    if text.startswith(("http://", "https://")):
        return {"uri": text}
    raise UsageError(f"--sink {text!r}: expected broker:NAME or an http(s) URL")


def sink_text(doc: Doc) -> str:
    """A source's sink as its create command takes it: ``broker:NAME`` or the uri."""
    sink = (doc.get("spec") or {}).get("sink") or {}
    ref = sink.get("ref")
    return f"{BROKER_PREFIX}{ref.get('name', '')}" if ref else str(sink.get("uri", ""))


@dataclass(frozen=True)
class SourceCommands:
    kind: str  # "PingSource"
    api_version: str  # "sources.knative.dev/v1"
    plural: str  # "pingsources"
    words: str  # "ping sources", in messages and help
    column: str  # the list's column between NAME and SINK: "SCHEDULE"
    origin: Callable[[Doc], str]  # its value
    spec: Callable[[argparse.Namespace], dict[str, Any]]  # create's spec, but for its sink
    fields: Callable[[Doc], Iterable[tuple[str, Any]]]  # describe's, between Age and Sink
    notes: Callable[[Doc], Iterable[str]]  # describe's lines after the fields

    def add_verbs(self, verbs: Any, conn: argparse.ArgumentParser) -> None:
        """``list``, ``describe`` and ``delete``; ``create`` (its flags are the kind's) is
        ``self.create``."""
        one = self.words[:-1]
        ls = verbs.add_parser("list", parents=[conn], help=f"list {self.words}")
        ls.set_defaults(func=command(self._list))
        describe = verbs.add_parser("describe", parents=[conn], help=f"show {_article(one)}")
        describe.add_argument("name")
        describe.set_defaults(func=command(self._describe))
        delete = verbs.add_parser("delete", parents=[conn], help=f"delete {_article(one)}")
        delete.add_argument("name")
        delete.set_defaults(func=command(self._delete))

    @property
    def create(self) -> Callable[[argparse.Namespace], int]:
        return command(self._create)

    def body(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {"name": args.name},
            "spec": {**self.spec(args), "sink": sink_of(args.sink)},
        }

    def _path(self, client: BrokerClient, *parts: str) -> str:
        tail = "/".join(quote(p, safe="") for p in (self.plural, *parts))
        namespace = quote(client.target.namespace, safe="")
        return f"/apis/{self.api_version}/namespaces/{namespace}/{tail}"

    def _create(self, args: argparse.Namespace, client: BrokerClient) -> None:
        doc = client.put(self._path(client, args.name), self.body(args))
        said = f"{self.kind} {args.name!r} saved in namespace {client.target.namespace!r}."
        show(args, doc, lambda: output.say(said))

    def _list(self, args: argparse.Namespace, client: BrokerClient) -> None:
        doc = client.get(self._path(client))
        rows = [
            (
                (s.get("metadata") or {}).get("name", ""),
                self.origin(s),
                sink_text(s),
                output.age((s.get("metadata") or {}).get("creationTimestamp")),
                output.ready(s),
                output.condition(s, "Ready").get("reason", ""),
            )
            for s in doc.get("items") or []
        ]
        empty = f"No {self.words} found in namespace {client.target.namespace!r}."
        header = ("NAME", self.column, "SINK", "AGE", "READY", "REASON")
        show(args, doc, lambda: output.table(header, rows, empty))

    def _describe(self, args: argparse.Namespace, client: BrokerClient) -> None:
        doc = client.get(self._path(client, args.name))
        show(args, doc, lambda: self._print_description(doc))

    def _print_description(self, doc: Doc) -> None:
        meta, status = doc.get("metadata") or {}, doc.get("status") or {}
        for label, value in (
            ("Name", meta.get("name")),
            ("Namespace", meta.get("namespace")),
            ("Age", output.age(meta.get("creationTimestamp"))),
            *self.fields(doc),
            ("Sink", sink_text(doc)),
            ("Sink URI", status.get("sinkUri")),
        ):
            if value not in (None, ""):
                output.say(f"{label + ':':<15}{value}")
        for line in self.notes(doc):
            output.say(line)
        output.conditions_table(doc)

    def _delete(self, args: argparse.Namespace, client: BrokerClient) -> None:
        doc = client.delete(self._path(client, args.name))
        said = f"{self.kind} {args.name!r} deleted in namespace {client.target.namespace!r}."
        show(args, doc, lambda: output.say(said))


def _article(words: str) -> str:
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words}"
