"""Entry point of both runtimes, chosen explicitly by ``--runtime`` (never by whether ``awsglue``
imports). On Glue this file is the job's script, with the default argument ``--runtime glue``;
locally::

    python -m spark_glue --archive <dir|s3://bucket/prefix> --out <dir> [--endpoint-url URL]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    runtime = argparse.ArgumentParser(add_help=False)
    runtime.add_argument("--runtime", choices=("glue", "local"), default="local")
    known, _ = runtime.parse_known_args(argv)
    if known.runtime == "glue":
        from spark_glue import job  # the only importer of awsglue

        job.main([sys.argv[0], *argv])
        return 0
    return _local(argv)


def _local(argv: list[str]) -> int:
    from spark_glue import local

    parser = argparse.ArgumentParser(
        prog="python -m spark_glue", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runtime", choices=("glue", "local"), default="local")
    parser.add_argument("--archive", required=True, help="a directory or s3://bucket/prefix")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--endpoint-url", help="S3 endpoint (moto, LocalStack); AWS_ENDPOINT_URL otherwise"
    )
    parser.add_argument("--master", default=local.LocalOptions.master)
    parser.add_argument("--driver-memory", default=local.LocalOptions.driver_memory)
    parser.add_argument(
        "--shuffle-partitions", type=int, default=local.LocalOptions.shuffle_partitions
    )
    args = parser.parse_args(argv)
    options = local.LocalOptions(args.master, args.driver_memory, args.shuffle_partitions)
    try:
        summary = local.run(args.archive, args.out, args.endpoint_url, options)
    except FileNotFoundError as exc:
        parser.exit(2, f"error: {exc}\n")
    i = summary["input"]
    print(
        f"metrics: {i['records']} records ({i['malformed']} malformed,"
        f" {i['duplicates']} duplicates) in {summary['seconds']} s -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
