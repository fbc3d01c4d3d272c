"""``POST .../namespaces/{ns}/triggers:test``: does a filter (any dialect, or a trigger's) pass an
event, and which term decided? Nothing is created or changed; the trigger, when named, is read.

Body: ``{"event": {...CloudEvent JSON format...}, "filters": [...]}``, or ``"filter":
{"attributes": {...}}`` (Knative's legacy form), or ``"trigger": "name"`` (its stored filters).
Answer: ``{"matched": bool, "reasons": [str, ...]}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.cloudevents.json_format import event_from_object
from chalicelib.core.errors import Problem, ValidationError
from chalicelib.core.filtering.explain import explain, filter_problems
from chalicelib.core.resources.trigger import Trigger
from chalicelib.services.resources import Resources

_FIELDS = ("event", "filters", "filter", "trigger")


class FilterTest:
    def __init__(self, triggers: Resources[Trigger]) -> None:
        self._triggers = triggers

    def run(self, namespace: str, body: Any) -> dict[str, Any]:
        problems: list[Problem] = []
        if not isinstance(body, Mapping):
            raise ValidationError([Problem("body", "must be a JSON object")])
        for key in body:
            if key not in _FIELDS:
                problems.append(Problem(str(key), f"unknown field; known: {', '.join(_FIELDS)}"))
        given = [key for key in ("filters", "filter", "trigger") if key in body]
        if len(given) != 1:
            problems.append(Problem("body", "give exactly one of: filters, filter, trigger"))
        event = self._event(body.get("event"), problems)
        attributes: Any = None
        filters: Any = None
        if len(given) == 1:
            mark = len(problems)
            attributes, filters = self._filter(namespace, body, problems)
            if len(problems) == mark:
                problems.extend(filter_problems(attributes, filters))
        if problems or event is None:
            raise ValidationError(problems)
        matched, reasons = explain(attributes, filters, event)
        answer: dict[str, Any] = {"matched": matched, "reasons": reasons}
        if "trigger" in body:
            answer["trigger"] = body["trigger"]
        return answer

    def _event(self, raw: object, problems: list[Problem]) -> CloudEvent | None:
        if raw is None:
            problems.append(Problem("event", "required: a CloudEvent in JSON format"))
            return None
        return event_from_object(raw, False, "event.", problems)

    def _filter(
        self, namespace: str, body: Mapping[str, Any], problems: list[Problem]
    ) -> tuple[Any, Any]:
        if "trigger" in body:
            name = body["trigger"]
            if not isinstance(name, str) or not name:
                problems.append(Problem("trigger", "must be a trigger name"))
                return None, None
            trigger = self._triggers.require(namespace, name).resource
            return dict(trigger.filter_attributes), list(trigger.filters)
        if "filter" in body:
            raw = body["filter"]
            if not isinstance(raw, Mapping) or set(raw) - {"attributes"}:
                problems.append(Problem("filter", 'must be {"attributes": {...}}'))
                return None, None
            return raw.get("attributes") or {}, None
        filters = body.get("filters")
        if filters is not None and not isinstance(filters, list):
            problems.append(Problem("filters", "must be a list of filter objects"))
            return None, None
        return None, filters
