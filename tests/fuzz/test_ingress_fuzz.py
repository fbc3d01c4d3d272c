"""Ingress under hostile requests: methods, paths, headers, content types and bodies of all three
modes, extreme numbers, deep nesting, invalid UTF-8 (issue 16)."""

from __future__ import annotations

import json
from typing import Any

from chalice.test import Client
from hypothesis import assume, example, given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ, check_answer

CE = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"

extreme_numbers = st.sampled_from(
    [
        "9" * 5000,
        "-" + "1" * 400,
        "1e999",
        "-1e999",
        "NaN",
        "Infinity",
        "-0",
        "0.0000001",
        "1" * 4301,
    ]
)
texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\r\n", "a\r\nb", "%ZZ", "%C3%28", "%00", "\x00", "\udcff"]),
    extreme_numbers,
)
header_values = texts.map(lambda t: t.encode("utf-8", "surrogatepass").decode("latin-1"))
names = st.one_of(
    st.sampled_from(
        ["ns", "default", "apis", "registry", "healthz", "metrics", "a" * 64, "A", "-x"]
    ),
    st.text(max_size=10),
)


def deep(levels: int, open_: str = "[", close: str = "]") -> str:
    return open_ * levels + close * levels


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def structured_bodies(draw: st.DrawFn) -> bytes:
    event: dict[str, Any] = {
        "specversion": draw(st.sampled_from(["1.0", "0.3", "0.1", "2.0", 1])),
        "id": draw(st.one_of(st.text(max_size=10), st.integers(), st.none())),
        "source": draw(st.one_of(texts, st.just("/s"))),
        "type": draw(st.one_of(texts, st.just("com.x"))),
    }
    for _ in range(draw(st.integers(0, 3))):
        event[draw(st.text(max_size=12))] = draw(json_values)
    if draw(st.booleans()):
        event["seq"] = draw(extreme_numbers)
    text = json.dumps(event)
    if draw(st.booleans()):  # numbers and nesting json.dumps would not write
        text = (
            text[:-1] + f', "n": {draw(extreme_numbers)}, "d": {deep(draw(st.integers(0, 3000)))}}}'
        )
    return text.encode()


bodies = st.one_of(
    structured_bodies(),
    structured_bodies().map(lambda b: b"[" + b + b"]"),
    st.binary(max_size=300),
    st.sampled_from(
        [b"", b"[]", b"{}", b"\xff\xfe", deep(100_000).encode(), deep(990, '{"a":', "}").encode()]
    ),
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], bytes]:
    method = draw(st.sampled_from(["POST"] * 6 + ["GET", "PUT", "DELETE", "OPTIONS", "PATCH"]))
    path = f"/{draw(names)}/{draw(names)}" if draw(st.integers(0, 4)) else "/ns/default"
    headers = {
        "content-type": draw(
            st.one_of(
                st.sampled_from(
                    [
                        CE,
                        BATCH,
                        "text/plain",
                        "APPLICATION/CloudEvents+JSON; charset=x",
                        "application/json",
                    ]
                ),
                header_values,
            )
        ),
    }
    if draw(st.booleans()):
        headers.update(
            {
                "ce-specversion": draw(st.sampled_from(["1.0", "0.3", "0.1"])),
                "ce-id": "1",
                "ce-source": "/s",
                "ce-type": "com.x",
            }
        )
    for _ in range(draw(st.integers(0, 4))):
        headers[f"ce-{draw(st.text(max_size=8))}"] = draw(header_values)
    if draw(st.booleans()):
        headers["ce-seq"] = draw(extreme_numbers)
    return method, path, headers, draw(bodies)


def _safe_path(path: str) -> str:
    from urllib.parse import quote

    return "/" + "/".join(quote(p, safe="") for p in path.split("/")[1:])


@FUZZ
@given(request=requests())
@example(
    request=(
        "POST",
        "/ns/default",
        {"content-type": CE},
        json.dumps(
            {"specversion": "1.0", "id": "1", "source": "/" + "s" * 2_000_000, "type": "t"}
        ).encode(),
    )
)
@example(
    request=(
        "POST",
        "/ns/default",
        {
            "ce-specversion": "1.0",
            "ce-id": "1",
            "ce-source": "/s",
            "ce-type": "com.x",
            "ce-seq": "9" * 5000,
            "content-type": "text/plain",
        },
        b"x",
    )
)
@example(
    request=(
        "POST",
        "/ns/default",
        {"content-type": CE},
        json.dumps(
            {"specversion": "0.3", "id": "1", "source": "/s", "type": "t", "ext": {"a\r\nb": "x"}}
        ).encode(),
    )
)
@example(request=("POST", "/apis/default", {"content-type": CE}, b"{}"))
@example(request=("POST", "/ns/default", {"content-type": CE}, deep(100_000).encode()))
@example(request=("POST", "/ns/default", {"content-type": BATCH}, b"[" + deep(990).encode() + b"]"))
def test_ingress_never_answers_5xx(
    client: Client, request: tuple[str, str, dict[str, str], bytes]
) -> None:
    method, path, headers, body = request
    # A path no route matches is answered by the gateway, not the app (a 404 problem from the
    # local server and from API Gateway's gateway response; Chalice's test client says 403).
    assume(len(path.split("/")) == 3 and all(path.split("/")[1:]))
    safe = {
        k.encode("latin-1", "replace").decode("latin-1"): v
        for k, v in headers.items()
        if k.isprintable() and "\n" not in k
    }
    response = client.http.request(method, _safe_path(path), headers=safe, body=body)
    check_answer(
        response.status_code, dict(response.headers), response.body, f"{method} {path[:60]}"
    )
