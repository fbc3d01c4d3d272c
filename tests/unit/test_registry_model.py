"""The model served at /registry/model against the spec's model files: the spec's endpoint and
message attributes unchanged, this broker's extensions declared, and the option defaults the
validator writes are exactly the model's."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chalicelib.core.registry import entities as reg
from chalicelib.core.registry.model import model
from chalicelib.core.registry.protocols import DEFAULTS
from chalicelib.core.resources.broker import admit_broker, parse_broker
from chalicelib.core.resources.trigger import admit_trigger, parse_trigger
from tests.shared_specs import require

SPECS = Path(__file__).parents[2].parent / "shared/specs/xregistry"
require(SPECS)


def spec(name: str) -> dict[str, Any]:
    return json.loads((SPECS / name).read_text())


def endpoints_group() -> dict[str, Any]:
    return model()["groups"]["endpoints"]


def test_endpoint_attributes_are_the_specs() -> None:
    ours = endpoints_group()["attributes"]
    for name, definition in spec("endpoint_model.json")["groups"]["endpoints"][
        "attributes"
    ].items():
        assert ours[name] == definition, name


def test_message_attributes_are_the_specs() -> None:
    ours = endpoints_group()["resources"]["messages"]
    theirs = spec("message_model.json")["groups"]["messagegroups"]["resources"]["messages"]
    for name, definition in theirs["attributes"].items():
        assert ours["attributes"][name] == definition, name
    assert (ours["maxversions"], ours["hasdocument"]) == (1, False)


def test_the_extensions_we_emit_are_declared() -> None:
    assert endpoints_group()["attributes"]["delivery"]["type"] == "object"
    messages = endpoints_group()["resources"]["messages"]["attributes"]
    for name in ("firstseen", "lastseen", "eventcount", "sources", "datacontenttypes", "*"):
        assert name in messages


def _required_defaults(protocol: str) -> dict[str, Any]:
    options = spec("endpoint_model.json")["groups"]["endpoints"]["attributes"]["protocol"][
        "ifvalues"
    ][protocol]["siblingattributes"]["protocoloptions"]["attributes"]
    return {k: a["default"] for k, a in options.items() if a.get("required") and "default" in a}


@pytest.mark.parametrize("protocol", sorted(DEFAULTS))
def test_option_defaults_are_the_models(protocol: str) -> None:
    assert dict(DEFAULTS[protocol]) == _required_defaults(protocol)


def test_generated_endpoints_use_only_declared_attributes() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    broker = admit_broker(
        parse_broker("ns", {"metadata": {"name": "b"}}, path_name="b"), None,
        uid="u", now=now,
    )  # fmt: skip
    trigger = admit_trigger(
        parse_trigger("ns", {"spec": {"broker": "b", "subscriber": {"uri": "http://s/"}}},
                      path_name="t"),
        None, uid="u", now=now,
    )  # fmt: skip
    observed = [reg.ObservedType("ns", "b", "t", "/s", "text/plain", now, now, 1)]
    definitions = [
        reg.broker_definition(broker, "http://x", reg.summarize(observed)[("ns", "b")]),
        reg.trigger_definition(trigger, broker, "http://x"),
        reg.control_plane_definition("http://x", True, "2030-01-01T00:00:00Z"),
    ]
    declared = _names(endpoints_group()["attributes"])
    message_declared = _names(endpoints_group()["resources"]["messages"]["attributes"])
    for d in definitions:
        assert set(d.attributes) <= declared, d.id
        for message in d.messages.values():
            assert set(message) <= message_declared


def _names(attributes: dict[str, Any]) -> set[str]:
    """Attribute names, with the sibling attributes each ``ifvalues`` value brings."""
    names = set(attributes)
    for definition in attributes.values():
        for branch in (definition.get("ifvalues") or {}).values():
            names |= set(branch.get("siblingattributes") or {})
    return names
