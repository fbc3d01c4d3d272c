"""``brokerctl apply|delete|diff -f`` and ``get``: Knative manifests applied as they are
(docs/manifests.md).

``apply`` checks every document with the server first (``PUT ?dryRun=All``: the API's own
validation), then writes, in file order, those that change, printing one line per object as
``kubectl apply`` does. A refused document stops the whole apply before anything is written, unless
``--continue``; a write that fails stops the documents after it. A document whose dry run finds a
resource it needs missing (a Replay's broker) while an earlier document creates one is checked by
its own write, after that one.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import yaml

from brokerctl import output
from brokerctl.client import ApiError, BrokerClient, CliError, UnreachableError, UsageError
from brokerctl.commands_common import command, connection_options
from brokerctl.manifests import (
    KINDS,
    Manifest,
    ManifestError,
    kind_named,
    load,
    managed,
    read_sources,
)

DRY_RUN = {"dryRun": "All"}


@dataclass(frozen=True)
class Planned:
    manifest: Manifest
    live: dict[str, Any] | None
    would: dict[str, Any] | None  # the server's dry-run answer; None when deferred
    deferred: str | None = None  # why it is checked only when written

    @property
    def outcome(self) -> str:
        if self.live is None:
            return "created"
        if self.would is not None and managed(self.live) == managed(self.would):
            return "unchanged"
        return "configured"


def _manifests(args: argparse.Namespace, client: BrokerClient) -> list[Manifest | ManifestError]:
    """Every document of ``-f``, in order; those that cannot be sent as ManifestErrors."""
    try:
        sources = read_sources(args.filename, args.recursive)
    except (OSError, ValueError) as err:
        raise UsageError(str(err)) from None
    items = load(sources, client.target.namespace)
    if not items:
        raise UsageError("no objects passed (every document is empty)")
    return items


def _warn_ignored(m: Manifest) -> None:
    if m.ignored:
        fields = ", ".join(m.ignored)
        output.warn(f"{m.where} ({m.ref}): ignored Kubernetes-only fields: {fields}")


def _get(client: BrokerClient, path: str) -> dict[str, Any] | None:
    try:
        doc = client.get(path)
    except ApiError as err:
        if err.status == 404:
            return None
        raise
    return doc if isinstance(doc, dict) else None


def _plan(client: BrokerClient, m: Manifest, creates_before: bool) -> Planned:
    live = _get(client, m.path)
    try:
        would = client.request("PUT", m.path, body=m.body, params=DRY_RUN)
    except ApiError as err:
        if err.status == 404 and creates_before:
            reason = str(err.problem.get("detail") or "a resource it needs does not exist")
            return Planned(m, live, None, deferred=reason)
        raise
    return Planned(m, live, would if isinstance(would, dict) else None)


def _refusal(m: Manifest | ManifestError, err: Exception) -> str:
    if isinstance(m, ManifestError):
        return str(m)
    return f"{m.where} ({m.ref}): {err}"


def _check_all(
    client: BrokerClient, items: Sequence[Manifest | ManifestError]
) -> tuple[list[Planned], list[str]]:
    """The server's verdict on every document, before anything is written."""
    planned: list[Planned] = []
    refused: list[str] = []
    creates = False
    for m in items:
        if isinstance(m, ManifestError):
            refused.append(str(m))
            continue
        _warn_ignored(m)
        try:
            p = _plan(client, m, creates)
        except UnreachableError:
            raise
        except CliError as err:
            refused.append(_refusal(m, err))
            continue
        if p.deferred:
            output.warn(
                f"{m.where} ({m.ref}): checked only when written, after the documents before "
                f"it: {p.deferred}"
            )
        creates = creates or p.outcome == "created"
        planned.append(p)
    return planned, refused


class _Report:
    """One ``kubectl apply`` line per object, or with ``-o yaml|json`` the objects themselves (as
    the API answered them; a ``List`` when several), printed at the end."""

    def __init__(self, fmt: str | None, suffix: str = "") -> None:
        self._fmt = fmt
        self._suffix = suffix
        self._docs: list[Any] = []

    def done(self, p: Planned, doc: Any) -> None:
        if self._fmt:
            self._docs.append(doc)
        else:
            output.say(f"{p.manifest.ref} {p.outcome}{self._suffix}")

    def close(self) -> None:
        if self._fmt and self._docs:
            many = {"apiVersion": "v1", "kind": "List", "items": self._docs}
            output.emit(self._docs[0] if len(self._docs) == 1 else many, self._fmt)


@command
def _apply(args: argparse.Namespace, client: BrokerClient) -> int:
    items = _manifests(args, client)
    planned, refused = _check_all(client, items)
    for line in refused:
        output.error(line)
    fmt = getattr(args, "output", None)
    if args.dry_run:
        report = _Report(fmt, " (server dry run)")
        for p in planned:
            report.done(p, p.would or p.manifest.body)
        report.close()
        return 1 if refused else 0
    if refused and not args.continue_on_error:
        output.error(
            f"{len(refused)} of {len(items)} documents refused; nothing was applied "
            "(--continue applies the others)"
        )
        return 1
    report = _Report(fmt)
    try:
        for i, p in enumerate(planned):
            if p.outcome == "unchanged":
                report.done(p, p.live)
                continue
            try:
                report.done(p, client.put(p.manifest.path, p.manifest.body))
            except UnreachableError:
                raise
            except CliError as err:
                output.error(_refusal(p.manifest, err))
                refused.append(str(err))
                if not args.continue_on_error:
                    left = len(planned) - i - 1
                    rest = f"{left} document{'' if left == 1 else 's'}"
                    output.error(f"stopped: {rest} after it not applied (--continue applies them)")
                    return 1
    finally:
        report.close()
    return 1 if refused else 0


@command
def _diff(args: argparse.Namespace, client: BrokerClient) -> int:
    """kubectl's exit codes: 0 nothing would change, 1 something would, 2 an error."""
    planned, refused = _check_all(client, _manifests(args, client))
    changes = 0
    for p in planned:
        m = p.manifest
        before = _yaml_lines(managed(p.live)) if p.live is not None else []
        after = _yaml_lines(managed(p.would if p.would is not None else m.body))
        name = f"{m.kind.ref}/{m.namespace}/{m.name}"
        lines = list(
            difflib.unified_diff(
                before,
                after,
                fromfile=f"live/{name}" if p.live is not None else "/dev/null",
                tofile=f"applied/{name}",
            )
        )
        if lines:
            changes += 1
            sys.stdout.writelines(lines)
    sys.stdout.flush()
    for line in refused:
        output.error(line)
    return 2 if refused else (1 if changes else 0)


def _yaml_lines(doc: Any) -> list[str]:
    text: str = yaml.safe_dump(doc, sort_keys=True, allow_unicode=True, default_flow_style=False)
    return text.splitlines(keepends=True)


@command
def _delete(args: argparse.Namespace, client: BrokerClient) -> int:
    items = _manifests(args, client)
    errors = [str(m) for m in items if isinstance(m, ManifestError)]
    if errors:
        for line in errors:
            output.error(line)
        output.error("nothing was deleted")
        return 1
    failed = 0
    for m in items:
        assert isinstance(m, Manifest)
        try:
            client.delete(m.path)
        except ApiError as err:
            if err.status == 404 and args.ignore_not_found:
                continue
            failed += 1
            if err.status == 404:
                output.error(f'{m.where}: {m.kind.ref} "{m.name}" not found')
            else:
                output.error(_refusal(m, err))
            continue
        output.say(f'{m.kind.ref} "{m.name}" deleted')
    return 1 if failed else 0


@command
def _get_resources(args: argparse.Namespace, client: BrokerClient) -> int:
    kind = kind_named(args.kind)
    if kind is None:
        known = ", ".join(k.plural for k in KINDS)
        raise UsageError(f'the kind "{args.kind}" is not known here (known: {known})')
    base = kind.collection(client.target.namespace, args.broker)
    doc = client.get(f"{base}/{quote(args.name, safe='')}" if args.name else base)
    if getattr(args, "output", None):
        output.emit(doc, args.output)
        return 0
    items = [doc] if args.name else list(doc.get("items") or [])
    rows = [
        (
            (i.get("metadata") or {}).get("name", ""),
            output.ready(i),
            output.condition(i, "Ready").get("reason", ""),
            output.age((i.get("metadata") or {}).get("creationTimestamp")),
        )
        for i in items
    ]
    output.table(
        ("NAME", "READY", "REASON", "AGE"),
        rows,
        empty=f"No {kind.plural} found in namespace {client.target.namespace!r}.",
    )
    return 0


def _file_options(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE|DIR|-",
        help=f"manifests to {verb}: a YAML or JSON file, a directory of them, or - for stdin "
        "(repeatable)",
    )
    parser.add_argument(
        "-R", "--recursive", action="store_true", help="with a directory: its sub-directories too"
    )


def add_manifest_parsers(sub: Any) -> None:
    parents = [connection_options()]
    apply = sub.add_parser(
        "apply",
        parents=parents,
        help="create or update the Knative resources of manifests (docs/manifests.md)",
    )
    _file_options(apply, "apply")
    apply.add_argument(
        "--dry-run",
        action="store_true",
        help="have the server check every document; change nothing",
    )
    apply.add_argument(
        "--continue",
        dest="continue_on_error",
        action="store_true",
        help="apply the documents the server accepts even when others are refused",
    )
    apply.set_defaults(func=_apply)

    diff = sub.add_parser(
        "diff",
        parents=parents,
        help="what apply would change (exit 0: nothing, 1: something, 2: an error)",
    )
    _file_options(diff, "compare")
    diff.set_defaults(func=_diff)

    delete = sub.add_parser(
        "delete", parents=parents, help="delete the resources that manifests name"
    )
    _file_options(delete, "delete")
    delete.add_argument(
        "--ignore-not-found", action="store_true", help="a resource already gone is no error"
    )
    delete.set_defaults(func=_delete)

    get = sub.add_parser(
        "get",
        parents=parents,
        help="resources of a kind, or one; -o yaml|json prints what apply takes back",
    )
    get.add_argument("kind", help="broker, trigger, kafkasource, eventtransform, replay, ...")
    get.add_argument("name", nargs="?")
    get.add_argument("--broker", default="default", help="replays: the broker they belong to")
    get.set_defaults(func=_get_resources)
