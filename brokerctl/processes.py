"""Child processes of local mode (the embedded AWS endpoint, the local Kafka broker)."""

from __future__ import annotations

import subprocess
from typing import Any


def end_process(process: subprocess.Popen[Any], grace_seconds: float = 10.0) -> None:
    """Ask ``process`` to stop (SIGTERM), and kill it if it has not within the grace period."""
    process.terminate()
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
