"""The xRegistry API view of the endpoint registry: entities with their core attributes (``self``,
``xid``, ``epoch``, times, collection urls and counts), the ``?inline`` flag, and the message
Resource with its ``meta`` and single default Version (the message model allows one version)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.registry.entities import (
    DEFAULT_VERSION_ID,
    SPECVERSION,
    Definition,
    EndpointStamps,
)


@dataclass(frozen=True)
class MessageEntity:
    id: str
    version: str
    attributes: Mapping[str, Any]
    epoch: int
    createdat: str
    modifiedat: str
    readonly: bool


@dataclass(frozen=True)
class Entity:
    id: str
    attributes: Mapping[str, Any]
    epoch: int
    createdat: str
    modifiedat: str
    messages: tuple[MessageEntity, ...]
    readonly: bool

    def message(self, message_id: str) -> MessageEntity | None:
        return next((m for m in self.messages if m.id == message_id), None)


@dataclass(frozen=True)
class Root:
    registryid: str
    epoch: int
    createdat: str
    modifiedat: str
    name: str
    description: str


def generated_entity(d: Definition, stamps: EndpointStamps) -> Entity:
    messages = tuple(
        MessageEntity(
            mid,
            DEFAULT_VERSION_ID,
            attrs,
            stamps.messages[mid].epoch,
            stamps.messages[mid].createdat,
            stamps.messages[mid].modifiedat,
            True,
        )
        for mid, attrs in sorted(d.messages.items())
    )
    s = stamps.endpoint
    return Entity(d.id, d.attributes, s.epoch, s.createdat, s.modifiedat, messages, True)


def stored_entity(endpoint_id: str, doc: Mapping[str, Any]) -> Entity:
    """A user-defined endpoint as the service stores it."""
    messages = []
    for mid, m in sorted((doc.get("messages") or {}).items()):
        attrs = dict(m["attributes"])
        version = str(attrs.pop("versionid", DEFAULT_VERSION_ID))
        messages.append(
            MessageEntity(mid, version, attrs, m["epoch"], m["createdat"], m["modifiedat"], False)
        )
    return Entity(
        endpoint_id,
        doc["attributes"],
        doc["epoch"],
        doc["createdat"],
        doc["modifiedat"],
        tuple(messages),
        False,
    )


# ---- ?inline ------------------------------------------------------------------------------------

_TREE: dict[str, Any] = {
    "model": {},
    "endpoints": {"messages": {"meta": {}, "versions": {}}},
}
# Where a request is directed, and the part of the tree below it.
LEVELS: Mapping[str, tuple[str, ...]] = {
    "root": (),
    "endpoints": ("endpoints",),
    "messages": ("endpoints", "messages"),
}

Inline = frozenset[tuple[str, ...]]


def parse_inline(values: Sequence[str] | None, level: str) -> Inline:
    """The set of inlined paths (relative to ``level``) the ``?inline`` flag asks for; each path
    brings its parents. ``*`` is everything below, except the root's ``model``."""
    if values is None:
        return frozenset()
    tree = _TREE
    for part in LEVELS[level]:
        tree = tree[part]
    out: set[tuple[str, ...]] = set()
    problems: list[Problem] = []
    for value in values:
        for path in (p.strip() for p in value.split(",")):
            parts = tuple((path or "*").split("."))
            wildcard = parts[-1] == "*"
            node = _walk(tree, parts[:-1] if wildcard else parts)
            if node is None:
                problems.append(
                    Problem("inline", f"{path!r} is not inlineable here; {_hint(tree)}")
                )
                continue
            base = parts[:-1] if wildcard else parts
            out.update(base[:i] for i in range(1, len(base) + 1))
            if wildcard:
                out.update(base + p for p in _paths(node) if base or p[0] != "model")
    if problems:
        raise ValidationError(problems)
    return frozenset(out)


def _walk(tree: Mapping[str, Any], parts: Sequence[str]) -> Mapping[str, Any] | None:
    node = tree
    for part in parts:
        if part not in node:
            return None
        node = node[part]
    return node


def _paths(tree: Mapping[str, Any]) -> Iterable[tuple[str, ...]]:
    for key, sub in tree.items():
        yield (key,)
        for rest in _paths(sub):
            yield (key, *rest)


def _hint(tree: Mapping[str, Any]) -> str:
    known = [".".join(p) for p in _paths(tree)]
    return f"inlineable: {', '.join(known)} or *" if known else "nothing is inlineable here"


def below(inline: Inline, name: str) -> Inline:
    return frozenset(p[1:] for p in inline if p[0] == name and len(p) > 1)


# ---- rendering ----------------------------------------------------------------------------------


class Urls:
    def __init__(self, public_url: str) -> None:
        self.root = f"{public_url.rstrip('/')}/registry"

    def of(self, xid: str) -> str:
        return self.root if xid == "/" else f"{self.root}{xid}"


def endpoint_xid(endpoint_id: str) -> str:
    return f"/endpoints/{endpoint_id}"


def message_xid(endpoint_id: str, message_id: str) -> str:
    return f"{endpoint_xid(endpoint_id)}/messages/{message_id}"


def render_root(
    root: Root,
    entities: Sequence[Entity],
    inline: Inline,
    urls: Urls,
    model: Mapping[str, Any],
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "specversion": SPECVERSION,
        "registryid": root.registryid,
        "self": urls.of("/"),
        "xid": "/",
        "epoch": root.epoch,
        "name": root.name,
        "description": root.description,
        "createdat": root.createdat,
        "modifiedat": root.modifiedat,
    }
    if ("model",) in inline:
        out["model"] = dict(model)
    out["endpointsurl"] = urls.of("/endpoints")
    out["endpointscount"] = len(entities)
    if ("endpoints",) in inline:
        out["endpoints"] = render_endpoints(entities, below(inline, "endpoints"), urls)
    return out


def render_endpoints(entities: Iterable[Entity], inline: Inline, urls: Urls) -> dict[str, Any]:
    return {e.id: render_endpoint(e, inline, urls) for e in sorted(entities, key=lambda e: e.id)}


def render_endpoint(entity: Entity, inline: Inline, urls: Urls) -> dict[str, Any]:
    xid = endpoint_xid(entity.id)
    out: dict[str, Any] = {
        "endpointid": entity.id,
        "self": urls.of(xid),
        "xid": xid,
        "epoch": entity.epoch,
        **entity.attributes,
        "createdat": entity.createdat,
        "modifiedat": entity.modifiedat,
        "messagesurl": urls.of(f"{xid}/messages"),
        "messagescount": len(entity.messages),
    }
    if ("messages",) in inline:
        out["messages"] = render_messages(entity, below(inline, "messages"), urls)
    return out


def render_messages(entity: Entity, inline: Inline, urls: Urls) -> dict[str, Any]:
    return {m.id: render_message(entity.id, m, inline, urls) for m in entity.messages}


def render_message(
    endpoint_id: str, m: MessageEntity, inline: Inline, urls: Urls
) -> dict[str, Any]:
    xid = message_xid(endpoint_id, m.id)
    out: dict[str, Any] = {"messageid": m.id, "versionid": m.version, "self": urls.of(xid)}
    out.update(_version_attributes(m, xid))
    out["metaurl"] = urls.of(f"{xid}/meta")
    if ("meta",) in inline:
        out["meta"] = render_meta(endpoint_id, m, urls)
    out["versionsurl"] = urls.of(f"{xid}/versions")
    out["versionscount"] = 1
    if ("versions",) in inline:
        out["versions"] = render_versions(endpoint_id, m, urls)
    return out


def _version_attributes(m: MessageEntity, xid: str) -> dict[str, Any]:
    return {
        "xid": xid,
        "epoch": m.epoch,
        "isdefault": True,
        **m.attributes,
        "createdat": m.createdat,
        "modifiedat": m.modifiedat,
        "ancestorid": m.version,
    }


def render_meta(endpoint_id: str, m: MessageEntity, urls: Urls) -> dict[str, Any]:
    xid = message_xid(endpoint_id, m.id)
    return {
        "messageid": m.id,
        "self": urls.of(f"{xid}/meta"),
        "xid": f"{xid}/meta",
        "epoch": m.epoch,
        "createdat": m.createdat,
        "modifiedat": m.modifiedat,
        "readonly": m.readonly,
        "compatibility": "none",
        "defaultversionid": m.version,
        "defaultversionurl": urls.of(f"{xid}/versions/{m.version}"),
        "defaultversionsticky": False,
    }


def render_versions(endpoint_id: str, m: MessageEntity, urls: Urls) -> dict[str, Any]:
    return {m.version: render_version(endpoint_id, m, urls)}


def render_version(endpoint_id: str, m: MessageEntity, urls: Urls) -> dict[str, Any]:
    xid = f"{message_xid(endpoint_id, m.id)}/versions/{m.version}"
    return {
        "messageid": m.id,
        "versionid": m.version,
        "self": urls.of(xid),
        **_version_attributes(m, xid),
    }
