"""A source's ``spec.sink`` (design.md §13.3, docs/sources.md): a ``ref`` to a Broker of the
source's namespace, or a ``uri`` (an absolute http(s) URL), as Knative's sources take it. Shared
by the sources that deliver themselves (PingSource, IntegrationSource). Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from chalicelib.core.errors import Problem
from chalicelib.core.names import name_problems, quote
from chalicelib.core.resources.broker import ingress_url
from chalicelib.core.resources.conditions import ConditionSet, previous_conditions
from chalicelib.core.resources.delivery_spec import uri_problems
from chalicelib.core.resources.fields import json_object as _object
from chalicelib.core.resources.fields import unknown_fields as _unknown

BROKER_API_VERSION = "eventing.knative.dev/v1"


@dataclass(frozen=True, slots=True)
class SourceSink:
    """Exactly one of ``broker`` (a Broker of the source's namespace) and ``uri``."""

    broker: str | None = None
    uri: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.broker is not None:
            return {
                "ref": {"apiVersion": BROKER_API_VERSION, "kind": "Broker", "name": self.broker}
            }
        return {"uri": self.uri}

    def resolved_uri(
        self, namespace: str, public_url: str, broker_exists: Callable[[str], bool]
    ) -> str | None:
        """Where the source's events go (status ``sinkUri``): its uri, or its broker's ingress
        URL; None while that broker does not exist."""
        if self.broker is None:
            return self.uri
        return (
            ingress_url(public_url, namespace, self.broker) if broker_exists(self.broker) else None
        )


def parse_sink(raw: object, namespace: str, problems: list[Problem]) -> SourceSink:
    """``spec.sink`` with every problem said; an empty SourceSink when there are any."""
    if raw is None:
        problems.append(
            Problem("spec.sink", "is required: a ref to a Broker of this namespace, or a uri")
        )
        return SourceSink()
    sink = _object(raw, "spec.sink", problems)
    _unknown(sink, ("ref", "uri"), "spec.sink", problems)
    if "ref" in sink and "uri" in sink:
        problems.append(Problem("spec.sink", "set ref or uri, not both"))
        return SourceSink()
    if "uri" in sink:
        uri = sink["uri"]
        found = uri_problems(uri, "spec.sink.uri")
        if not found and urlsplit(str(uri)).scheme.lower() not in ("http", "https"):
            found = [Problem("spec.sink.uri", f"{quote(uri)} must be an http or https URL")]
        problems += found
        return SourceSink() if found else SourceSink(uri=str(uri))
    if "ref" not in sink:
        problems.append(Problem("spec.sink", "needs a ref to a Broker of this namespace, or a uri"))
        return SourceSink()
    ref = _object(sink.get("ref"), "spec.sink.ref", problems)
    _unknown(ref, ("apiVersion", "kind", "name", "namespace"), "spec.sink.ref", problems)
    before = len(problems)
    if ref.get("kind") != "Broker":
        problems.append(
            Problem(
                "spec.sink.ref.kind",
                f'must be "Broker", got {quote(ref.get("kind"))} (for anything else use uri)',
            )
        )
    if ref.get("apiVersion", BROKER_API_VERSION) != BROKER_API_VERSION:
        problems.append(Problem("spec.sink.ref.apiVersion", f'must be "{BROKER_API_VERSION}"'))
    if ref.get("namespace", namespace) != namespace:
        problems.append(
            Problem("spec.sink.ref.namespace", "must be the source's own namespace (or omitted)")
        )
    problems += name_problems(ref.get("name"), "spec.sink.ref.name", what="broker name")
    return SourceSink() if len(problems) > before else SourceSink(broker=str(ref["name"]))


SINK_PROVIDED = "SinkProvided"
DEPLOYED = "Deployed"
SOURCE_CONDITIONS = ConditionSet((SINK_PROVIDED, DEPLOYED))


def source_status(
    generation: int,
    sink: SourceSink,
    *,
    sink_uri: str | None,
    deployed: bool,
    deploy_reason: str,
    deploy_message: str,
    ce_attributes: Mapping[str, str],
    now: datetime,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A PingSource's or IntegrationSource's status. ``sink_uri``: where its events go, None when
    its broker does not exist; ``deployed``: its schedule, mapping or rule runs,
    else why not (``deploy_reason``, ``deploy_message``); ``ce_attributes``: the type and source
    of the events it sends."""
    manager = SOURCE_CONDITIONS.manage(previous_conditions(previous), now)
    status: dict[str, Any] = {"observedGeneration": generation}
    if sink_uri is None:
        message = f'Broker "{sink.broker}" does not exist'
        manager.mark_false(SINK_PROVIDED, "BrokerDoesNotExist", message)
    else:
        manager.mark_true(SINK_PROVIDED)
        status["sinkUri"] = sink_uri
    if deployed:
        manager.mark_true(DEPLOYED)
    else:
        manager.mark_false(DEPLOYED, deploy_reason, deploy_message)
    status["ceAttributes"] = [dict(ce_attributes)]
    status["conditions"] = manager.to_json()
    return status
