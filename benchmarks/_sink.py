"""A minimal HTTP/1.1 keep-alive sink answering 202 to every POST: the subscriber for throughput
benchmarks. One asyncio loop in its own process, so concurrent connections cost no thread
switching and the sink is not what a benchmark measures.

Run: python benchmarks/_sink.py PORT [DELAY_MS]  (DELAY_MS: service time per request, no CPU)
"""

from __future__ import annotations

import asyncio
import sys

RESPONSE = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"


DELAY_S = 0.0


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:].strip())
            if length:
                await reader.readexactly(length)
            if DELAY_S:
                await asyncio.sleep(DELAY_S)
            writer.write(RESPONSE)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=512)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    DELAY_S = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 0.0
    asyncio.run(main(int(sys.argv[1])))
