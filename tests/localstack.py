"""LocalStack's runtime for tests (brokerctl/localstack_host.py): skipped only where no
Python >= 3.12 exists; a LocalStack that should start and does not is a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerctl import localstack_host
from brokerctl.embedded_aws import free_port


def host_localstack(scratch: Path) -> localstack_host.HostLocalStack:
    """A LocalStack in host mode on a free port with ``scratch`` as its filesystem, not started."""
    if localstack_host.venv_python() is None:
        if localstack_host.find_python() is None:
            pytest.skip("LocalStack's runtime needs Python >= 3.12, and there is none here")
        pytest.fail(
            "Python >= 3.12 is here but .venv-localstack is not: run `make localstack-venv`"
        )
    return localstack_host.HostLocalStack(free_port(), scratch)
