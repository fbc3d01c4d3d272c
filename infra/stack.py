"""Create or update a CloudFormation stack and follow its events until it settles.

boto3's waiters block silently for minutes; this polls the stack's events instead, so a newcomer
sees each resource being created and, when something fails, the reason next to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

Say = Callable[[str], None]

_SETTLED = ("_COMPLETE", "_FAILED")  # ..._CLEANUP_IN_PROGRESS ends in neither
CAPABILITIES = ["CAPABILITY_NAMED_IAM"]


class StackError(RuntimeError):
    """The stack did not reach the state asked for."""


def _client_error() -> type[Exception]:
    from botocore.exceptions import ClientError

    error: type[Exception] = ClientError
    return error


def describe(cfn: Any, name: str) -> dict[str, Any] | None:
    try:
        stacks = cfn.describe_stacks(StackName=name)["Stacks"]
    except _client_error() as exc:
        if "does not exist" in str(exc):
            return None
        raise
    return stacks[0] if stacks else None


def outputs(cfn: Any, name: str) -> dict[str, str]:
    stack = describe(cfn, name)
    if stack is None:
        raise StackError(f"stack {name} does not exist")
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def exports(cfn: Any, name: str) -> dict[str, str]:
    stack = describe(cfn, name)
    if stack is None:
        raise StackError(f"stack {name} does not exist")
    return {
        o["ExportName"]: o["OutputValue"] for o in stack.get("Outputs", []) if "ExportName" in o
    }


def deploy(
    cfn: Any,
    name: str,
    template_body: str,
    parameters: Mapping[str, str],
    *,
    tags: Mapping[str, str] | None = None,
    say: Say = print,
    poll_seconds: float = 5.0,
) -> str:
    """Creates the stack, or updates it; returns the final status. Raises StackError on failure."""
    stack = describe(cfn, name)
    if stack is not None and stack["StackStatus"] == "ROLLBACK_COMPLETE":
        # A stack whose creation failed can only be deleted; do so, then create it afresh.
        say(f"stack {name} failed to create earlier; deleting it before trying again")
        delete(cfn, name, say=say, poll_seconds=poll_seconds)
        stack = None
    since = time.time() - 1
    common: dict[str, Any] = {
        "StackName": name,
        "TemplateBody": template_body,
        "Capabilities": CAPABILITIES,
        "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
    }
    given: list[dict[str, Any]] = [
        {"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()
    ]
    if stack is None:
        say(f"creating stack {name}")
        cfn.create_stack(**common, Parameters=given)
        want = "CREATE_COMPLETE"
    else:
        # Parameters not given keep their current values. They are passed as values rather than
        # UsePreviousValue (NoEcho ones excepted), which moto only honours for parameters that
        # were given explicitly at creation.
        for p in stack.get("Parameters", []):
            if p["ParameterKey"] in parameters:
                continue
            if p.get("ParameterValue") == "****":
                given.append({"ParameterKey": p["ParameterKey"], "UsePreviousValue": True})
            else:
                given.append(
                    {"ParameterKey": p["ParameterKey"], "ParameterValue": p["ParameterValue"]}
                )
        say(f"updating stack {name}")
        try:
            cfn.update_stack(**common, Parameters=given)
        except _client_error() as exc:
            if "No updates are to be performed" in str(exc):
                say(f"stack {name} is up to date")
                return str(stack["StackStatus"])
            raise
        want = "UPDATE_COMPLETE"
    status = follow(cfn, name, since, say=say, poll_seconds=poll_seconds)
    if status != want:
        raise StackError(f"stack {name} ended in {status}; see the events above")
    return status


def delete(cfn: Any, name: str, *, say: Say = print, poll_seconds: float = 5.0) -> None:
    stack = describe(cfn, name)
    if stack is None:
        say(f"stack {name} does not exist")
        return
    since = time.time() - 1
    stack_id = stack["StackId"]
    cfn.delete_stack(StackName=name)
    status = follow(cfn, stack_id, since, say=say, poll_seconds=poll_seconds)
    if status != "DELETE_COMPLETE":
        raise StackError(f"stack {name} ended in {status}; see the events above")


def follow(cfn: Any, name: str, since: float, *, say: Say, poll_seconds: float) -> str:
    """Prints the stack's new events until it reaches a settled state; returns that state."""
    seen: set[str] = set()
    while True:
        stack = describe(cfn, name)
        if stack is None:  # deleted stacks vanish from describe_stacks by name in moto
            return "DELETE_COMPLETE"
        for event in _new_events(cfn, name, since, seen):
            reason = event.get("ResourceStatusReason")
            line = f"  {event['ResourceStatus']:<28} {event['LogicalResourceId']}"
            say(line + (f" - {reason}" if reason else ""))
        status = str(stack["StackStatus"])
        if status.endswith(_SETTLED):
            return status
        time.sleep(poll_seconds)


def _new_events(cfn: Any, name: str, since: float, seen: set[str]) -> list[dict[str, Any]]:
    events = []
    for event in cfn.describe_stack_events(StackName=name).get("StackEvents", []):
        if event["EventId"] in seen or event["Timestamp"].timestamp() < since:
            continue
        seen.add(event["EventId"])
        events.append(event)
    return sorted(events, key=lambda e: e["Timestamp"])
