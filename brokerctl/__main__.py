"""brokerctl: the command line for the Serverless Broker (in the spirit of ``kn``)."""

from __future__ import annotations

import os
import sys

from brokerctl import cli


def main(argv: list[str] | None = None) -> int:
    parser = cli.build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
