"""The README's commands, as a newcomer runs them (issue 22): its Quickstart and brokerctl blocks
are read from README.md and run by bash against ``make run``'s local mode, with no AWS credentials
and no AWS configuration in the environment (a fresh machine). The one change: the ports, 8080 and
8081 in the README, are free ones here (BROKERCTL_URL carries the API's for the CLI)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from brokerctl.embedded_aws import free_port
from tests.e2e.conftest import ROOT, LocalBroker, start_local_broker, stop_local_broker, wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("curl") is None, reason="the README's quickstart uses curl"),
]

README = (ROOT / "README.md").read_text()
BIN = Path(sys.executable).parent


def block_after(heading: str, nth: int = 0) -> str:
    """The ``nth`` ```sh block after the ``heading`` line."""
    section = README[README.index(heading) :]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return str(blocks[nth])


def fresh_machine_env(home: Path, api_url: str) -> dict[str, str]:
    """No AWS credentials, profile, region or endpoint; brokerctl and python on PATH as in a
    shell with the venv's bin first (the README calls .venv/bin/brokerctl, shown as brokerctl)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BROKER"))}
    env.update(HOME=str(home), BROKERCTL_URL=api_url, PATH=f"{BIN}:{env.get('PATH', '')}")
    return env


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalBroker]:
    b = start_local_broker({"HOME": str(tmp_path)})  # make run's runtime (only ports differ)
    yield b
    stop_local_broker(b)


def bash(script: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}\n{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def ported(script: str, api_port: int, sub_port: int) -> str:
    return script.replace("8080", str(api_port)).replace("8081", str(sub_port))


def test_quickstart_verbatim(broker: LocalBroker, tmp_path: Path) -> None:
    api_port = int(broker.url.rsplit(":", 1)[1])
    sub_port = free_port()
    env = fresh_machine_env(tmp_path, broker.url)
    display_cmd = ported(block_after("## Quickstart", 0), api_port, sub_port).strip()
    assert display_cmd.startswith(".venv/bin/brokerctl event-display")
    # Its output in a file the test can read while it runs: delivery follows the 202, so the
    # event is looked for until it shows, not once at the end.
    output = tmp_path / "event-display.out"
    out_file = output.open("w")
    display = subprocess.Popen(
        ["bash", "-c", f"exec {display_cmd}"], cwd=ROOT, env=env,
        stdout=out_file, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: _listening(sub_port), 30, "event-display listening")
        script = ported(block_after("## Quickstart", 1), api_port, sub_port)
        setup, _, send = script.partition("# Ready once")
        send = "# Ready once" + send
        api_line = next(line for line in setup.splitlines() if line.startswith("API="))
        bash(setup, env, tmp_path)
        # "Ready once every ingress routes to it (a few seconds)": as the reader waits, so do we.
        broker.wait_ready("demo", "triggers", "hello-display")
        out = bash(f"{api_line}\n{send}", env, tmp_path)
        assert "HTTP/1.1 202" in out and '"Ready"' in out
        wait_until(
            lambda: "Hello, broker!" in output.read_text(), 30, "event-display to show the event"
        )
    finally:
        display.terminate()
        display.wait(timeout=10)
        out_file.close()
    shown = output.read_text()
    assert "Hello, broker!" in shown and "demo.hello" in shown, shown


def test_cli_quickstart_and_metrics_report_verbatim(broker: LocalBroker, tmp_path: Path) -> None:
    pytest.importorskip("pyspark", reason="the metrics report runs the PySpark job")
    if shutil.which("java") is None:
        pytest.skip("the metrics report needs Java 17")
    api_port = int(broker.url.rsplit(":", 1)[1])
    env = fresh_machine_env(tmp_path, broker.url)
    lines = [
        re.sub(r"\s+#.*$", "", line)
        for line in ported(block_after("## brokerctl"), api_port, free_port()).splitlines()
    ]
    script = "\n".join(line for line in lines if line.strip()).replace("\\\n", " ")
    assert "brokerctl metrics report" in script
    out = bash(script, env, tmp_path, timeout=600)
    assert "hello-display" in out
    report = tmp_path / "report"
    assert any(report.rglob("*.html")), sorted(p.name for p in report.rglob("*"))
    assert (tmp_path / "registry.json").stat().st_size > 0


def _listening(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
    except httpx.TransportError:
        return False
    return True
