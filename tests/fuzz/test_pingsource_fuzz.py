"""PingSources under hostile input (docs/sources.md): hostile documents never answer 5xx and every
4xx is a problem; any text as a schedule and time zone is either refused with problems or becomes
a schedule whose Scheduler form fits Scheduler's limits and reads back to the same next time."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from chalice.test import Client
from hypothesis import example, given
from hypothesis import strategies as st

from chalicelib.core.cron import MAX_SCHEDULE_CHARS, from_scheduler, parse_cron
from tests.fuzz.conftest import FUZZ, check_answer
from tests.fuzz.test_ingress_fuzz import json_values, texts

PS = "/apis/sources.knative.dev/v1/namespaces/ns/pingsources"
anything = st.one_of(json_values, texts, st.integers(), st.floats(allow_nan=False))
pieces = st.sampled_from(
    [
        "*", "?", "/", "-", ",", "0", "1", "5", "7", "12", "23", "31", "59", "60", "99999",
        "*/0", "*/5", "1-5", "5-1", "MON", "sun", "JAN", "dec", "L", "W", "#", "@hourly",
        "@every", "@yearly", "CRON_TZ=", "TZ=", "Europe/Paris", "../x", "UTC", " ", "  ",
    ]
)  # fmt: skip
schedules = st.one_of(st.lists(pieces, min_size=1, max_size=14).map(" ".join), texts, anything)
zones = st.one_of(
    st.none(), st.sampled_from(["UTC", "Europe/Paris", "Local", "/etc/passwd", "", "x" * 60]),
    texts, anything,
)  # fmt: skip
ping_docs = st.fixed_dictionaries(
    {"metadata": st.one_of(st.just({"name": "p1"}), anything)},
    optional={
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "schedule": schedules,
                "timezone": zones,
                "contentType": st.one_of(st.just("application/json"), texts, anything),
                "data": st.one_of(texts, anything),
                "dataBase64": st.one_of(st.just("eyJhIjogMX0="), texts, anything),
                "ceOverrides": st.one_of(
                    st.fixed_dictionaries({"extensions": st.dictionaries(texts, anything)}),
                    anything,
                ),
                "sink": st.one_of(
                    st.fixed_dictionaries(
                        {}, optional={"ref": st.one_of(
                            st.fixed_dictionaries({"kind": st.just("Broker"), "name": texts}),
                            anything,
                        ), "uri": texts},
                    ),
                    anything,
                ),
            },
        )
    },
)  # fmt: skip


@FUZZ
@given(doc=ping_docs, method=st.sampled_from(["PUT", "PUT", "POST", "GET", "DELETE"]))
@example(
    doc={"metadata": {"name": "p1"}, "spec": {"schedule": "0 0 1 * MON", "sink": {"uri": "x"}}},
    method="PUT",
)
def test_control_plane_never_answers_5xx(client: Client, doc: Any, method: str) -> None:
    path = PS if method == "POST" else f"{PS}/p1"
    headers = {"content-type": "application/json"}
    response = client.http.request(method, path, headers=headers, body=json.dumps(doc).encode())
    check_answer(response.status_code, dict(response.headers), response.body, f"{method} {path}")


@FUZZ
@given(schedule=schedules, zone=zones)
@example(schedule="*/1,*/2 0-23/3 1-31/4 */5 *", zone="Europe/Paris")
def test_a_schedule_is_refused_or_fits_scheduler(schedule: Any, zone: Any) -> None:
    cron, problems = parse_cron(schedule, zone, "spec.schedule", "spec.timezone")
    assert (cron is None) == bool(problems)
    if cron is None:
        return
    expression, tz = cron.scheduler()
    assert len(expression) <= MAX_SCHEDULE_CHARS and len(tz) <= 50
    start = datetime(2026, 3, 28, 23, 59, tzinfo=UTC)
    back = from_scheduler(expression, tz)
    assert back.next_after(start) == cron.next_after(start)  # type: ignore[call-arg]
