"""One local SparkSession for the whole test session (JVM start-up is the slow part)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from spark_glue import local

    session = local.session(
        local.LocalOptions(master="local[2]", driver_memory="1g", shuffle_partitions=2)
    )
    yield session
    session.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # PySpark's collect() reads results over a loopback socket it leaves to the garbage collector
    # (pyspark/rdd.py `_load_from_socket`: "closed when garbage-collected"); the ResourceWarning
    # is raised from socket.py, so pyproject's `ResourceWarning:pyspark.*` filter cannot match it.
    # Ignore exactly that message, and only in Spark tests.
    for item in items:
        if item.get_closest_marker("spark"):
            item.add_marker(
                pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
            )
