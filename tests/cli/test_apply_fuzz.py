"""Hostile manifests (docs/manifests.md, "Limits"): whatever bytes ``apply -f`` is given, reading
them ends in documents or in errors naming where, never in another exception; alias bombs, deep
nesting and oversized input are refused within their budgets, before anything is sent."""

from __future__ import annotations

import io
import json
import sys
import time

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from brokerctl import manifests
from brokerctl.manifests import Budget, Manifest, ManifestError, Source, load
from tests.cli.conftest import RecordingApi, Runner

YAMLISH = st.text(alphabet="[]{}:-&*!|>'\"#%@`,?<=.~ \t\nabcxyz019", max_size=300)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)
ENVELOPES = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["eventing.knative.dev/v1", "sources.knative.dev/v1", "x"]),
        "kind": st.sampled_from(["Broker", "Trigger", "Replay", "List", "BrokerList", "Pod"]),
        "metadata": JSON_VALUES,
        "spec": JSON_VALUES,
        "items": JSON_VALUES,
    }
)


def read(data: bytes, name: str = "f.yaml") -> list[Manifest | ManifestError]:
    out = load([Source(name, data)], "default")
    assert all(isinstance(x, Manifest | ManifestError) for x in out)
    for x in out:
        if isinstance(x, Manifest):
            json.dumps(x.body, allow_nan=False)  # what is sent is plain JSON
    return out


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
@example(b"\x00")  # PyYAML's reader refuses it in its constructor, before the first document
def test_any_bytes_read_as_documents_or_errors(data: bytes):
    read(data)
    read(data, "f.json")


@settings(max_examples=300, deadline=None)
@given(YAMLISH)
def test_yaml_punctuation_reads_as_documents_or_errors(text: str):
    read(text.encode())


@settings(max_examples=200, deadline=None)
@given(st.lists(ENVELOPES, min_size=1, max_size=4), st.booleans())
def test_manifest_shaped_documents_read_as_documents_or_errors(docs: list[object], as_json: bool):
    if as_json:
        read(json.dumps(docs).encode(), "f.json")
    else:
        read(yaml.safe_dump_all(docs).encode())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(YAMLISH | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_apply_never_ends_in_a_traceback(
    api: RecordingApi, cli: Runner, monkeypatch: pytest.MonkeyPatch, text: str
):
    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("latin-1", "replace")))
    )
    r = cli("apply", "-f", "-", "--dry-run")
    assert r.code in (0, 1, 2)
    assert "Traceback" not in r.err


# ---- bombs --------------------------------------------------------------------------------------


def billion_laughs(levels: int = 9) -> bytes:
    lines = ["apiVersion: eventing.knative.dev/v1", "kind: Broker", "metadata: {name: b}", "spec:"]
    lines.append('  l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]')
    for i in range(1, levels):
        refs = ",".join([f"*l{i - 1}"] * 10)
        lines.append(f"  l{i}: &l{i} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


def test_an_alias_bomb_stops_at_the_value_budget():
    started = time.monotonic()
    (err,) = read(billion_laughs())  # 10^9 values once expanded
    elapsed = time.monotonic() - started
    assert isinstance(err, ManifestError)
    assert err.message == f"more than {manifests.MAX_NODES} values in all (YAML aliases expanded)"
    assert elapsed < 5, elapsed  # the budget's walk, not the expansion (~0.1 s measured)


def test_an_alias_of_a_long_string_stops_at_the_character_budget():
    big = "x" * (1024 * 1024)
    text = "apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: {name: b}\n"
    text += f"spec:\n  s: &s {big}\n"
    text += "  copies: [" + ",".join(["*s"] * 40) + "]\n"
    (err,) = read(text.encode())
    assert isinstance(err, ManifestError) and "characters in all" in err.message


def test_recursive_aliases_and_deep_nesting_are_refused():
    (err,) = read(
        b"apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: &m {name: x, self: *m}\n"
    )
    assert isinstance(err, ManifestError)  # an alias inside its own anchor is a YAML error
    (err,) = read(b"a: &a [*a]\n")
    assert isinstance(err, ManifestError) and "nested deeper than" in err.message
    (err,) = read(b"a: " + b"[" * 100_000)
    assert isinstance(err, ManifestError) and "nested deeper than 64 levels" in err.message
    (err,) = read(b"[" * 100_000, "f.json")
    assert isinstance(err, ManifestError) and "nested deeper than 64 levels" in err.message


def test_merge_keys_repeated_keys_and_non_json_values_are_refused():
    base = b"apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: {name: x}\n"
    for extra, message in [
        (b"spec: &s {a: 1}\nother: {<<: *s}\n", "merge keys (<<) are not accepted"),
        (b"spec: {a: 1, a: 2}\n", "the key 'a' is given twice"),
        (b"spec: {a: .nan}\n", "spec.a: nan is not a JSON number"),
        (b"spec: {a: !!set {x, y}}\n", "spec.a: a set is not JSON data"),
        (b"spec: {a: 1" + b"0" * 5000 + b"}\n", "a number has too many digits"),
        (b"spec: {? [a, b] : c}\n", "not valid YAML"),
    ]:
        (err,) = read(base + extra)
        assert isinstance(err, ManifestError) and message in err.message, (extra, err)


def test_timestamps_stay_strings_and_scalar_keys_become_strings():
    (m,) = read(
        b"apiVersion: eventing.knative.dev/v1\nkind: Trigger\nmetadata: {name: t}\n"
        b"spec: {from: 2026-01-31T10:00:00Z, day: 2026-01-31, filter: {attributes: {true: 1}}}\n"
    )
    assert isinstance(m, Manifest)
    assert m.body["spec"] == {
        "from": "2026-01-31T10:00:00Z",
        "day": "2026-01-31",
        "filter": {"attributes": {"true": 1}},
    }


def test_input_size_and_document_count_are_bounded(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (manifests.MAX_INPUT_BYTES + 1))
    with pytest.raises(ValueError, match="larger than"):
        manifests.read_sources([str(big)], recursive=False)
    doc = b"apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: {name: x}\n---\n"
    out = read(doc * (manifests.MAX_DOCUMENTS + 5))
    assert isinstance(out[-1], ManifestError)
    assert out[-1].message == f"more than {manifests.MAX_DOCUMENTS} documents in all"
    assert len(out) == manifests.MAX_DOCUMENTS + 1  # stops at the budget: nothing after it


def test_budget_counts_every_command_input_together():
    b = Budget()
    b.document("a", {"x": ["y"] * 10})
    assert (b.documents, b.nodes) == (1, 12)
