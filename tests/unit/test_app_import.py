"""app.py imports with an empty environment and builds no AWS client at import time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, **env: str) -> str:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **env}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_app_imports_with_an_empty_environment_and_no_boto3() -> None:
    # Importing is clean; building the container is refused (fail closed: no stage, no local
    # mode), and the control plane's routes are signed.
    code = (
        "import sys, app\n"
        "assert 'boto3' not in sys.modules, 'boto3 imported at import time'\n"
        "assert app._CP_AUTH is not None, 'an empty environment opened the control plane'\n"
        "from chalicelib.config import ConfigurationError\n"
        "from chalicelib.container import get_container\n"
        "try:\n"
        "    get_container()\n"
        "except ConfigurationError as exc:\n"
        "    assert 'BROKER_STAGE' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('a container was built without a stage')\n"
        "print('ok')\n"
    )
    assert _run(code) == "ok"


def test_local_mode_builds_no_aws_client_before_first_use() -> None:
    code = (
        "import sys, app\n"
        "from chalicelib.container import get_container\n"
        "c = get_container()\n"
        "assert c.settings.stage == 'local' and c.settings.local_mode\n"
        "assert c.settings.endpoint_url is None\n"
        "assert 'clients' not in vars(c), 'AWS clients built before first use'\n"
        "assert 'boto3' not in sys.modules, 'boto3 imported before first use'\n"
        "print('ok')\n"
    )
    assert _run(code, BROKER_STAGE="local", BROKER_LOCAL_MODE="true") == "ok"


def test_adapters_honour_aws_endpoint_url() -> None:
    from chalicelib.adapters.aws_clients import AwsClients
    from chalicelib.config import Settings

    settings = Settings.from_env({"AWS_ENDPOINT_URL": "http://127.0.0.1:4599"})
    client = AwsClients(settings).client("sqs")
    assert client.meta.endpoint_url == "http://127.0.0.1:4599"
