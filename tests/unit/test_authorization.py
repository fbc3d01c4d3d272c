"""The pure parts of EventPolicies (docs/security.md), table-driven: label selectors as
Kubernetes reads them, sender namespaces, the IAM principal in a request context, and the
decision for a sender and its events."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.core import senders
from chalicelib.core.authorization import compile_rule, decide, guarded
from chalicelib.core.cloudevents.event import CloudEvent
from chalicelib.core.errors import Problem
from chalicelib.core.resources.event_policy import parse_event_policy
from chalicelib.core.resources.label_selector import parse_selector
from chalicelib.http_ingress import iam_principal

LABELS = {"team": "shop", "tier": "gold"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({}, True),
        ({"matchLabels": {"team": "shop"}}, True),
        ({"matchLabels": {"team": "billing"}}, False),
        ({"matchLabels": {"team": "shop", "zone": "a"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, True),
        (
            {
                "matchLabels": {"team": "shop"},
                "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}],
            },
            False,
        ),
    ],
)
def test_label_selectors(selector: dict[str, Any], matches: bool) -> None:
    problems: list[Problem] = []
    parsed = parse_selector(selector, "s", problems)
    assert problems == []
    assert parsed.matches(LABELS) is matches


@pytest.mark.parametrize(
    ("selector", "field"),
    [
        ({"matchLabels": {"a b": "x"}}, "s.matchLabels[a b]"),
        ({"matchLabels": {"team": "x" * 64}}, "s.matchLabels[team]"),
        ({"matchLabels": {"bad_prefix!/name": "x"}}, "s.matchLabels[bad_prefix!/name]"),
        ({"matchExpressions": [{"key": "t", "operator": "In"}]}, "s.matchExpressions[0].values"),
        (
            {"matchExpressions": [{"key": "t", "operator": "in", "values": ["a"]}]},
            "s.matchExpressions[0].operator",
        ),
        ({"matchExpressions": "team"}, "s.matchExpressions"),
        (
            {"matchExpressions": [{"key": "t", "operator": "Exists", "x": 1}]},
            "s.matchExpressions[0].x",
        ),
    ],
)
def test_a_bad_selector_names_its_field(selector: dict[str, Any], field: str) -> None:
    problems: list[Problem] = []
    parse_selector(selector, "s", problems)
    assert field in [p.field for p in problems], problems


@pytest.mark.parametrize(
    ("sender", "namespace"),
    [
        ("token:ns:abc", "ns"),
        ("source:ns:PingSource:p", "ns"),
        ("trigger:other:t", "other"),
        ("arn:aws:iam::123456789012:role/x", None),
        ("token::abc", None),
        ("token", None),
    ],
)
def test_the_namespace_of_a_sender(sender: str, namespace: str | None) -> None:
    assert senders.namespace_of(sender) == namespace


ROLE = "arn:aws:sts::123456789012:assumed-role/p/s"


@pytest.mark.parametrize(
    ("context", "principal"),
    [
        ({"authorizer": {"iam": {"userArn": ROLE}}}, ROLE),  # Function URL, AWS_IAM
        ({"identity": {"userArn": ROLE, "sourceIp": "1.2.3.4"}}, ROLE),  # API Gateway, IAM
        ({"identity": {"userArn": None, "sourceIp": "1.2.3.4"}}, None),  # no IAM auth
        ({"authorizer": {"iam": "a string from a Lambda authorizer"}}, None),
        ({"authorizer": {"principalId": "x"}}, None),
        (None, None),
    ],
)
def test_the_iam_principal_of_a_request_context(context: Any, principal: str | None) -> None:
    assert iam_principal(context) == principal


def _event(type_: str) -> CloudEvent:
    return CloudEvent({"specversion": "1.0", "id": "1", "source": "/s", "type": type_})


def _rules(*specs: dict[str, Any]) -> list[Any]:
    return [
        compile_rule(
            parse_event_policy("ns", {"metadata": {"name": f"p{i}"}, "spec": s}, path_name=None)
        )
        for i, s in enumerate(specs)
    ]


@pytest.mark.parametrize(
    ("rules", "mode", "sender", "types", "allowed", "decision"),
    [
        ([], "allow-same-namespace", "token:ns:a", ["t"], True, "allow-same-namespace"),
        (
            [],
            "allow-same-namespace",
            "trigger:other:t",
            ["t"],
            False,
            "default-allow-same-namespace",
        ),
        ([], "allow-same-namespace", ROLE, ["t"], False, "default-allow-same-namespace"),
        ([], "allow-all", ROLE, ["t"], True, "allow-all"),
        ([], "deny-all", "token:ns:a", ["t"], False, "default-deny-all"),
        ([], "allow-all", None, ["t"], False, "anonymous-sender"),
        (
            _rules({"from": [{"sub": "TOKEN:NS:*"}]}),
            "deny-all",
            "token:ns:a",
            ["t"],
            True,
            "admitted",
        ),
        (
            _rules({"from": [{"sub": "token:ns:a"}]}),
            "allow-all",
            "token:ns:b",
            ["t"],
            False,
            "sender-not-admitted",
        ),
        (_rules({}), "allow-all", "token:ns:a", ["t"], False, "sender-not-admitted"),
        (
            _rules({"from": [{"sub": "token:ns:a"}], "filters": [{"exact": {"type": "x"}}]}),
            "allow-all",
            "token:ns:a",
            ["x", "y"],
            False,
            "event-not-admitted",
        ),
        (
            _rules(
                {"from": [{"sub": "token:ns:a"}], "filters": [{"exact": {"type": "x"}}]},
                {"from": [{"sub": "token:ns:*"}], "filters": [{"exact": {"type": "y"}}]},
            ),
            "deny-all",
            "token:ns:a",
            ["x", "y"],
            True,
            "admitted",
        ),
    ],
)
def test_decisions(
    rules: list[Any], mode: str, sender: str | None, types: list[str], allowed: bool, decision: str
) -> None:
    got = decide(rules, mode, "ns", "b", sender, [_event(t) for t in types])
    assert (got.allowed, got.decision) == (allowed, decision)


def test_a_broker_is_guarded_by_a_policy_or_by_ingress_auth() -> None:
    assert not guarded((), "none")
    assert guarded((), "token")
    assert guarded(tuple(_rules({})), "none")


def test_the_default_mode_is_a_stage_setting_and_a_wrong_one_stops_the_functions() -> None:
    from chalicelib.config import ConfigurationError, Settings

    assert Settings.from_env({"BROKER_STAGE": "prod"}).authorization_default_mode == (
        "allow-same-namespace"
    )
    chosen = Settings.from_env(
        {"BROKER_STAGE": "prod", "BROKER_AUTHORIZATION_DEFAULT_MODE": "deny-all"}
    )
    assert chosen.authorization_default_mode == "deny-all" and chosen.problems == ()
    wrong = Settings.from_env({"BROKER_STAGE": "prod", "BROKER_AUTHORIZATION_DEFAULT_MODE": "deny"})
    with pytest.raises(ConfigurationError, match="BROKER_AUTHORIZATION_DEFAULT_MODE='deny'"):
        wrong.require_runnable()
