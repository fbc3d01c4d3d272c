"""Knative manifests as users keep them in git: files, directories or stdin of multi-document YAML
or JSON, read with bounds, each document turned into what ``apply``, ``delete`` and ``diff`` send
(docs/manifests.md). No HTTP here: validation is the server's (``PUT ?dryRun=All``); this module
only finds what a document is, where it goes, and drops what Kubernetes alone writes.

Reading is bounded: input bytes, documents, nesting depth, and the nodes and characters of the
documents once YAML aliases are expanded (a "billion laughs" file stops at the budget, cheaply);
YAML merge keys and keys given twice are refused; timestamps stay strings, as in JSON.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

import yaml

from chalicelib.core import limits
from chalicelib.core.errors import ValidationError

MAX_INPUT_BYTES = 4 * 1024 * 1024  # all files of one command together
MAX_DOCUMENTS = 1000  # after List items are expanded
MAX_FILES = 1000
MAX_DEPTH = limits.MAX_JSON_DEPTH  # the API's own limit on a body
MAX_NODES = 200_000  # values in all documents, aliases expanded
MAX_CHARS = 16 * 1024 * 1024  # characters of keys and strings, aliases expanded
EXTENSIONS = (".yaml", ".yml", ".json")
STDIN = "<stdin>"


@dataclass(frozen=True)
class Kind:
    """A kind apply knows: where its resources live in the API."""

    api_version: str  # "eventing.knative.dev/v1"
    kind: str  # "Broker"
    plural: str  # "brokers"
    under_broker: bool = False  # replays: .../brokers/{broker}/replays/{name}

    @property
    def group(self) -> str:
        return self.api_version.rsplit("/", 1)[0]

    @property
    def ref(self) -> str:
        """As kubectl names it: ``broker.eventing.knative.dev``."""
        return f"{self.kind.lower()}.{self.group}"

    def collection(self, namespace: str, broker: str | None = None) -> str:
        base = f"/apis/{self.api_version}/namespaces/{quote(namespace, safe='')}"
        if self.under_broker:
            return f"{base}/brokers/{quote(broker or '', safe='')}/{self.plural}"
        return f"{base}/{self.plural}"


# apiVersion/kind -> API path (design.md §2.2, §10, §12, §13).
KINDS = (
    Kind("eventing.knative.dev/v1", "Broker", "brokers"),
    Kind("eventing.knative.dev/v1", "Trigger", "triggers"),
    Kind("sources.knative.dev/v1", "KafkaSource", "kafkasources"),
    Kind("eventing.knative.dev/v1alpha1", "EventTransform", "eventtransforms"),
    Kind("eventing.knative.dev/v1", "Replay", "replays", under_broker=True),
    Kind("sources.knative.dev/v1", "PingSource", "pingsources"),
    Kind("sources.knative.dev/v1alpha1", "IntegrationSource", "integrationsources"),
    Kind("sinks.knative.dev/v1alpha1", "IntegrationSink", "integrationsinks"),
    Kind("serverless-broker.dev/v1alpha1", "Connection", "connections"),
    Kind("eventing.knative.dev/v1alpha1", "EventPolicy", "eventpolicies"),
)
# Versions Knative still serves beside the one here, with the same schema: applied as that one.
ALIASES = {("sources.knative.dev/v1beta1", "KafkaSource"): "sources.knative.dev/v1"}

# Written by Kubernetes (or by this API), never by the user: dropped with a warning.
SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "ownerReferences",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
)
SERVER_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


class ManifestError(Exception):
    """A document (or a whole file) that cannot be sent: ``where`` names the file and document."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")


def find_kind(api_version: object, kind: object) -> Kind | None:
    api_version = ALIASES.get((str(api_version), str(kind)), api_version)
    return next((k for k in KINDS if (k.api_version, k.kind) == (api_version, kind)), None)


def kind_named(word: str) -> Kind | None:
    """``get``'s KIND: ``broker``, ``brokers``, ``Broker`` or ``brokers.eventing.knative.dev``."""
    word = word.lower()
    for k in KINDS:
        names = {k.kind.lower(), k.plural}
        if word in names or word in {f"{n}.{k.group}" for n in names}:
            return k
    return None


# ---- one document ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Manifest:
    where: str  # "app.yaml, document 2"
    kind: Kind
    namespace: str
    name: str
    broker: str | None  # a Replay's broker (metadata.broker, as the API shows it)
    body: dict[str, Any]  # what is PUT
    ignored: tuple[str, ...]  # Kubernetes-only fields dropped

    @property
    def ref(self) -> str:
        return f"{self.kind.ref}/{self.name}"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.kind.ref, self.namespace, self.broker or "", self.name)

    @property
    def path(self) -> str:
        return f"{self.kind.collection(self.namespace, self.broker)}/{quote(self.name, safe='')}"


def manifest(where: str, doc: object, default_namespace: str) -> Manifest:
    """The document as a resource to send; ManifestError when it cannot be addressed (its
    apiVersion/kind unknown, no name). Everything else is the server's to judge."""
    if not isinstance(doc, Mapping):
        raise ManifestError(where, f"must be an object with apiVersion and kind, got {_type(doc)}")
    kind = find_kind(doc.get("apiVersion"), doc.get("kind"))
    if kind is None:
        known = ", ".join(f"{k.api_version} {k.kind}" for k in KINDS)
        raise ManifestError(
            where,
            f"apiVersion/kind: {json.dumps(doc.get('apiVersion'))} {json.dumps(doc.get('kind'))}"
            f" is not a kind brokerctl applies (known: {known})",
        )
    body = {k: v for k, v in doc.items() if k != "status"}
    body["apiVersion"] = kind.api_version
    ignored = ["status"] if "status" in doc else []
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        raise ManifestError(where, f"metadata: is required: an object with a name ({kind.kind})")
    meta = dict(meta)
    ignored += [f"metadata.{k}" for k in SERVER_METADATA if k in meta]
    for k in SERVER_METADATA:
        meta.pop(k, None)
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        dropped = [a for a in SERVER_ANNOTATIONS if a in annotations]
        ignored += [f'metadata.annotations["{a}"]' for a in dropped]
        meta["annotations"] = {k: v for k, v in annotations.items() if k not in dropped}
        if not meta["annotations"]:
            del meta["annotations"]
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(where, "metadata.name: is required (a non-empty string)")
    namespace = meta.get("namespace", default_namespace)
    if not isinstance(namespace, str) or not namespace:
        raise ManifestError(where, "metadata.namespace: must be a non-empty string")
    broker = None
    if kind.under_broker:
        broker = meta.pop("broker", None)
        if not isinstance(broker, str) or not broker:
            raise ManifestError(where, "metadata.broker: is required: the broker it replays")
    body["metadata"] = meta
    return Manifest(where, kind, namespace, name, broker, body, tuple(ignored))


def managed(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What apply sets on a resource: its identity, labels, annotations and spec (compared to
    tell ``unchanged`` from ``configured``, and shown by ``diff``)."""
    meta = doc.get("metadata") or {}
    out_meta = {k: meta[k] for k in ("name", "namespace", "broker") if k in meta}
    for k in ("labels", "annotations"):
        if meta.get(k):
            out_meta[k] = meta[k]
    out = {"apiVersion": doc.get("apiVersion"), "kind": doc.get("kind"), "metadata": out_meta}
    if "spec" in doc:
        out["spec"] = doc["spec"]
    return out


# ---- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    name: str  # a path as given, or <stdin>
    data: bytes


def read_sources(
    paths: Sequence[str], recursive: bool, stdin: BinaryIO | None = None
) -> list[Source]:
    """The files named (``-`` is stdin; a directory gives its .yaml, .yml and .json files in
    name order, its sub-directories too with ``recursive``), at most MAX_INPUT_BYTES in all.
    ValueError names a path that cannot be read."""
    sources: list[Source] = []
    budget = [MAX_INPUT_BYTES]
    for given in paths:
        if given == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            sources.append(Source(STDIN, _bounded(stream.read(budget[0] + 1), STDIN, budget)))
            continue
        path = Path(given)
        if path.is_dir():
            pattern = "**/*" if recursive else "*"
            files = sorted(p for p in path.glob(pattern) if p.suffix in EXTENSIONS and p.is_file())
            if not files:
                raise ValueError(f"{given}: no .yaml, .yml or .json files in this directory")
        elif path.is_file():
            files = [path]
        else:
            raise ValueError(f'the path "{given}" does not exist')
        for file in files:
            if len(sources) >= MAX_FILES:
                raise ValueError(f"more than {MAX_FILES} files")
            with file.open("rb") as f:
                sources.append(
                    Source(str(file), _bounded(f.read(budget[0] + 1), str(file), budget))
                )
    return sources


def _bounded(data: bytes, name: str, budget: list[int]) -> bytes:
    if len(data) > budget[0]:
        raise ValueError(f"{name}: the input is larger than {MAX_INPUT_BYTES} bytes in all")
    budget[0] -= len(data)
    return data


def documents(source: Source) -> Iterator[tuple[str, object]]:
    """``(where, document)`` for each non-empty document of a source; List kinds (``kind: List``,
    ``BrokerList`` as ``get -o yaml`` prints) give their items. ManifestError for a source that
    does not parse, naming the document where it stops."""
    for index, doc in enumerate(_parse(source), start=1):
        where = f"{source.name}, document {index}"
        if doc is None:
            continue
        if isinstance(doc, Mapping) and str(doc.get("kind", "")).endswith("List"):
            items = doc.get("items")
            if not isinstance(items, list):
                raise ManifestError(where, "items: a List must have an items array")
            for i, item in enumerate(items, start=1):
                yield f"{where}, item {i}", item
        else:
            yield where, doc


def _parse(source: Source) -> Iterator[object]:
    text = source.data
    if source.name.endswith(".json") or text.lstrip()[:1] in (b"{", b"["):
        try:
            doc = limits.read_json(text, "json", max_bytes=MAX_INPUT_BYTES, max_depth=MAX_DEPTH)
        except ValidationError as err:
            if source.name.endswith(".json"):
                raise ManifestError(f"{source.name}, document 1", err.detail) from None
        else:  # a JSON array holds documents, as a YAML stream does
            yield from doc if isinstance(doc, list) else [doc]
            return
    index = 0
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # reads the first bytes already: may refuse them
        while loader.check_data():
            index += 1
            yield loader.get_data()
    except (yaml.YAMLError, ValueError, _TooDeepError) as err:
        raise ManifestError(f"{source.name}, document {index or 1}", _yaml_problem(err)) from None
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_problem(err: Exception) -> str:
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return f"not valid YAML: {err.problem or err.context}{where}"
    if isinstance(err, ValueError):  # int() of a YAML integer over Python's 4,300 digits
        return "not valid YAML: a number has too many digits"
    return f"not valid YAML: {err}"


class _TooDeepError(Exception):
    pass


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no types here
    """PyYAML's safe loader (plain data only) with a nesting bound while composing, merge keys
    and repeated keys refused, and timestamps kept as the strings they are (JSON has no time
    type; the API parses its own times)."""

    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeepError(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        for key, _ in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                raise yaml.constructor.ConstructorError(
                    None, None, "merge keys (<<) are not accepted", key.start_mark
                )

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                if (key.tag, key.value) in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key.value!r} is given twice", key.start_mark
                    )
                seen.add((key.tag, key.value))
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        return mapping


_Loader.add_constructor(
    "tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node)
)


class BudgetError(ManifestError):
    """The input as a whole is over a bound: nothing after it is read."""


class Budget:
    """What all documents of one command may hold, aliases expanded: documents, values,
    characters; and each document's depth. ``document`` gives back the document as plain JSON
    data, or raises ManifestError (BudgetError when the whole input is over a bound)."""

    def __init__(self) -> None:
        self.documents = 0
        self.nodes = 0
        self.chars = 0

    def document(self, where: str, doc: object) -> object:
        self.documents += 1
        if self.documents > MAX_DOCUMENTS:
            raise BudgetError(where, f"more than {MAX_DOCUMENTS} documents in all")
        try:
            return self._plain(doc, "", 0)
        except _OverBudgetError as err:
            raise BudgetError(where, str(err)) from None
        except ValueError as err:
            raise ManifestError(where, str(err)) from None

    def _plain(self, value: object, path: str, depth: int) -> object:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _OverBudgetError(f"more than {MAX_NODES} values in all (YAML aliases expanded)")
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels (a recursive YAML alias?)")
        if isinstance(value, str):
            self._count(len(value))
            return value
        if value is None or isinstance(value, bool | int):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{path}: {value} is not a JSON number")
            return value
        if isinstance(value, Mapping):
            out: dict[str, object] = {}
            for key, item in value.items():
                text = _key(key, path)
                self._count(len(text))
                out[text] = self._plain(item, f"{path}.{text}" if path else text, depth + 1)
            return out
        if isinstance(value, list | tuple):
            return [self._plain(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
        raise ValueError(f"{path or 'the document'}: a {_type(value)} is not JSON data")

    def _count(self, chars: int) -> None:
        self.chars += chars
        if self.chars > MAX_CHARS:
            raise _OverBudgetError(
                f"more than {MAX_CHARS} characters in all (YAML aliases expanded)"
            )


class _OverBudgetError(Exception):
    pass


def _key(key: object, path: str) -> str:
    """Keys as YAML-to-JSON converters write them (``true: x`` is ``"true": x``)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    raise ValueError(f"{path or 'the document'}: a {_type(key)} cannot be a key")


def _type(value: object) -> str:
    names: dict[type, str] = {list: "list", dict: "object", str: "string"}
    return names.get(type(value)) or type(value).__name__


def load(sources: Sequence[Source], default_namespace: str) -> list[Manifest | ManifestError]:
    """Every document of every source in order, as a Manifest or as the ManifestError saying why
    it cannot be sent (all of them, as the API names every problem). The same resource twice is
    an error: which one would win?"""
    budget = Budget()
    out: list[Manifest | ManifestError] = []
    first: dict[tuple[str, str, str, str], str] = {}
    for source in sources:
        try:
            for where, raw in documents(source):
                try:
                    m = manifest(where, budget.document(where, raw), default_namespace)
                except BudgetError:
                    raise
                except ManifestError as err:
                    out.append(err)
                    continue
                if m.key in first:
                    out.append(ManifestError(where, f"{m.ref} is also in {first[m.key]}"))
                    continue
                first[m.key] = where
                out.append(m)
        except BudgetError as err:
            out.append(err)
            break
        except ManifestError as err:
            out.append(err)
    return out
