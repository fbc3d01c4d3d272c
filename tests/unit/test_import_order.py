"""Modules the data plane uses from worker threads are imported with the package, in the main
thread. powertools' packages import each other in a cycle; a first import of them racing in two
threads (ingress and delivery in the local runtime) fails with "partially initialized module" and
the request answers 500."""

from __future__ import annotations

import subprocess
import sys

THREAD_USED = (
    "aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch",
    "aws_lambda_powertools.utilities.batch",
)

PROBE = """
import sys
import chalicelib.services.delivery, chalicelib.services.ingress
missing = [m for m in {mods!r} if m not in sys.modules]
print(",".join(missing))
"""


def test_powertools_is_imported_with_the_services_not_on_first_use() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(mods=THREAD_USED)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "", f"imported lazily (first use may race in threads): {out}"
