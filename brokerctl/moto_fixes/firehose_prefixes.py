"""Firehose evaluates ``!{timestamp:yyyy/MM/dd/HH}`` in an S3 prefix and then adds no date folder
of its own (https://docs.aws.amazon.com/firehose/latest/dev/s3-prefixes.html); moto keeps the
expression as text and appends ``YYYY/MM/DD/HH/`` (``FirehoseBackend._format_s3_object_path``,
last changed by https://github.com/getmoto/moto/pull/7884; no moto issue is filed for the
expressions). Objects land where AWS puts them (``archive/2026/01/31/12/...``), so that a replay
lists the hours of its range locally as on AWS (docs/replay.md)."""

from __future__ import annotations

import re
from typing import Any

_JAVA_DATE = (("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S"))
_EXPRESSION = re.compile(r"!\{timestamp:([^}]*)\}")


def render_timestamp_prefixes() -> None:
    from moto.core.utils import utcnow
    from moto.firehose import models
    from moto.moto_api._internal import mock_random

    def strftime(java: str, now: Any) -> str:
        for token, directive in _JAVA_DATE:
            java = java.replace(token, directive)
        return str(now.strftime(java))

    def _format_s3_object_path(delivery_stream_name: str, version_id: str, prefix: str) -> str:
        now = utcnow()
        if _EXPRESSION.search(prefix):
            folder = _EXPRESSION.sub(lambda m: strftime(m.group(1), now), prefix)
        else:
            folder = f"{prefix}{'' if prefix.endswith('/') or not prefix else '/'}"
            folder += now.strftime("%Y/%m/%d/%H/")
        return (
            f"{folder}{delivery_stream_name}-{version_id}-"
            f"{now.strftime('%Y-%m-%d-%H-%M-%S')}-{mock_random.uuid4()}"
        )

    models.FirehoseBackend._format_s3_object_path = staticmethod(  # type: ignore[method-assign]
        _format_s3_object_path
    )
