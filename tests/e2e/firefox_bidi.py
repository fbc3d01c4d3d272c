"""Debian's Firefox ESR under Playwright, without a browser download.

Playwright drives a stock Firefox over WebDriver BiDi (``firefox.launch(channel="moz-firefox")``);
its own patched Firefox build would be a download from its CDN, which these machines cannot reach.
Playwright follows Firefox's release channel, and ESR lags it: Firefox ESR 153 answers
``unknown command`` to ``emulation.setMediaFeaturesOverride`` (prefers-color-scheme emulation),
which Playwright sends for every new page. So Playwright starts this module instead of Firefox
(as ``executable_path``, through a small launcher script): it starts Firefox with Playwright's
arguments and stands between the two WebSocket ends, passing every message through unchanged
except those commands, which it answers itself with an empty success. The console's tests use no
colour-scheme emulation, so nothing they check depends on it; everything else (navigation, input,
DOM, EventSource, fetch, screenshots) is Firefox's own. Any other command Firefox refuses is
passed back to Playwright as it is, so the test fails instead of silently passing.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import sys
from pathlib import Path

ANSWERED_HERE = frozenset({"emulation.setMediaFeaturesOverride"})
_LISTENING = re.compile(r"WebDriver BiDi listening on (ws://\S+)")


def launcher(firefox: str, directory: Path) -> str:
    """An executable that runs this module for ``firefox``; its path, for ``executable_path``."""
    path = directory / "firefox-bidi"
    root = Path(__file__).resolve().parents[2]
    path.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path.insert(0, {str(root)!r})\n"
        "from tests.e2e.firefox_bidi import main\n"
        f"sys.exit(main({firefox!r}, sys.argv[1:]))\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def _relay(firefox: str, args: list[str]) -> int:
    import websockets  # test-only dependency (requirements-dev.txt)

    process = await asyncio.create_subprocess_exec(
        firefox, *args, env=dict(os.environ), stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    upstream = ""

    async def session(client: websockets.ServerConnection) -> None:
        path = client.request.path if client.request else "/session"
        async with websockets.connect(upstream + path, max_size=None) as browser:

            async def outbound() -> None:
                async for message in client:
                    command = json.loads(message)
                    if command.get("method") in ANSWERED_HERE:
                        answer = {"type": "success", "id": command["id"], "result": {}}
                        await client.send(json.dumps(answer))
                    else:
                        await browser.send(message)

            async def inbound() -> None:
                async for message in browser:
                    await client.send(message)

            tasks = [asyncio.create_task(outbound()), asyncio.create_task(inbound())]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()

    server = None
    while line := await process.stderr.readline():
        text = line.decode(errors="replace")
        found = _LISTENING.search(text)
        if found and server is None:
            upstream = found.group(1)
            server = await websockets.serve(session, "127.0.0.1", 0, max_size=None)
            port = server.sockets[0].getsockname()[1]
            text = f"WebDriver BiDi listening on ws://127.0.0.1:{port}\n"
        sys.stderr.write(text)
        sys.stderr.flush()
    code = await process.wait()
    if server is not None:
        server.close()
    return code


def main(firefox: str, args: list[str]) -> int:
    return asyncio.run(_relay(firefox, args))
