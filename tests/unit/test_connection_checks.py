"""ConnectionChecks (services/connections.py) on a clock of its own: a connection's readiness is
checked once per generation for its TTL, a missing secret's problem is remembered the same way
as a success, and the memory is bounded (the one ExpiringCache the secrets and tokens use)."""

from __future__ import annotations

from chalicelib.core.resources.connection import ApiKey, Connection
from chalicelib.services import connections
from chalicelib.services.connection_auth import ConnectionAuth
from chalicelib.services.connections import ConnectionChecks
from tests.fakes import ScriptedSender
from tests.fakes.secrets import MemorySecrets

ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:serverless-broker/local/connections/s"


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def checks() -> tuple[ConnectionChecks, MemorySecrets, Clock]:
    secrets, clock = MemorySecrets(), Clock()
    auth = ConnectionAuth(lambda ns, name: None, secrets, ScriptedSender(), None, clock=clock)
    # problem() reads no stored resource: the Resources argument is not used here.
    return ConnectionChecks(None, auth, ttl=30.0, clock=clock), secrets, clock  # type: ignore[arg-type]


def key(name: str = "k", generation: int = 1) -> Connection:
    return Connection("ns", name, ApiKey("X-Key", ARN), uid="uid", generation=generation)


def test_a_problem_is_remembered_for_the_ttl_then_checked_again() -> None:
    found, secrets, clock = checks()
    first = found.problem(key())
    assert first is not None and first[0] == "SecretNotReadable"
    secrets.values[ARN] = "PLANTED"
    assert found.problem(key()) == first  # remembered: None is not mistaken for "not seen"
    assert found.problem(key(generation=2)) is None  # a new generation is checked now
    clock.now += 31
    assert found.problem(key()) is None


def test_a_ready_answer_is_remembered_too() -> None:
    found, secrets, clock = checks()
    secrets.values[ARN] = "PLANTED"
    assert found.problem(key()) is None
    reads = secrets.reads
    assert found.problem(key()) is None
    assert secrets.reads == reads
    clock.now += 31
    found.problem(key())
    assert secrets.reads == reads  # the auth's own secret TTL (60 s) still serves it


def test_the_checks_are_bounded() -> None:
    found, secrets, _ = checks()
    secrets.values[ARN] = "PLANTED"
    for i in range(connections.MAX_ENTRIES + 50):
        found.problem(key(f"c{i}"))
    assert len(found._seen._items) == connections.MAX_ENTRIES
