"""The Lambda layer holding the archive spool's shutdown extension (infra/spool_extension/), for
every function of a stage that carries archive records (``BROKER_ARCHIVE_CARRY_SECONDS`` > 0):
without it, what a container carries when Lambda shuts it down would be lost uncounted
(docs/cost.md).

Two ways in, as for the Function URL: the packaged template gets an
``AWS::Serverless::LayerVersion`` (its zip beside ``sam.json``, uploaded by
``aws cloudformation package``) in every function's ``Layers``, and ``chalice deploy`` gets the
ARN of a version published through the Lambda API (a new version only when the zip changed) in
the stage's ``layers``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from pathlib import Path
from typing import Any

EXTENSION_NAME = "broker-archive-spool"
LAYER_ID = "ArchiveSpoolLayer"
ZIP_NAME = "archive-spool-layer.zip"
SOURCE = Path(__file__).resolve().parent / "spool_extension"
# (path in the layer, source file, mode): Lambda runs /opt/extensions/<name> at Init.
_FILES = (
    (f"extensions/{EXTENSION_NAME}", "launcher", 0o755),
    (f"{EXTENSION_NAME}/extension.py", "extension.py", 0o644),
)
_EPOCH = (2020, 1, 1, 0, 0, 0)  # fixed timestamps: the same sources give the same zip (and hash)


def carrying(config: dict[str, Any], stage: str) -> bool:
    """Whether the stage's functions carry archive records (so they need the layer)."""
    env = {
        **config.get("environment_variables", {}),
        **config["stages"][stage].get("environment_variables", {}),
    }
    try:
        return float(env.get("BROKER_ARCHIVE_CARRY_SECONDS") or 0) > 0
    except ValueError:
        return False  # the functions refuse to start on it (chalicelib/config.py)


def layer_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, source, mode in _FILES:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = (0o100000 | mode) << 16  # a regular file with its permissions
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, (SOURCE / source).read_bytes())
    return buffer.getvalue()


def layer_name(app: str, stage: str) -> str:
    return f"{app}-{stage}-archive-spool"


def sam_resources(app: str, stage: str) -> dict[str, Any]:
    """The layer resource of a ``chalice package`` template (its zip: ``write_zip``)."""
    return {
        LAYER_ID: {
            "Type": "AWS::Serverless::LayerVersion",
            "Properties": {
                "LayerName": layer_name(app, stage),
                "Description": "Writes carried archive records to Firehose at shutdown",
                "ContentUri": f"./{ZIP_NAME}",
                "RetentionPolicy": "Delete",
            },
        }
    }


def attach(function: dict[str, Any]) -> None:
    """Adds the layer to a function resource's ``Layers``."""
    layers = function["Properties"].setdefault("Layers", [])
    if {"Ref": LAYER_ID} not in layers:
        layers.append({"Ref": LAYER_ID})


def write_zip(out: Path) -> Path:
    path = out / ZIP_NAME
    path.write_bytes(layer_zip())
    return path


def publish(lam: Any, name: str) -> str:
    """The ARN of a version of layer ``name`` holding this extension: the latest one when its
    content is the same, else a new one."""
    content = layer_zip()
    digest = base64.b64encode(hashlib.sha256(content).digest()).decode()
    versions = lam.list_layer_versions(LayerName=name).get("LayerVersions", [])
    if versions:
        latest = max(versions, key=lambda v: v["Version"])
        current = lam.get_layer_version(LayerName=name, VersionNumber=latest["Version"])
        if current.get("Content", {}).get("CodeSha256") == digest:
            return str(latest["LayerVersionArn"])
    published = lam.publish_layer_version(
        LayerName=name,
        Description="Writes carried archive records to Firehose at shutdown",
        Content={"ZipFile": content},
    )
    return str(published["LayerVersionArn"])


def delete(lam: Any, name: str) -> None:
    """Deletes every version of layer ``name`` (a destroy; none is fine)."""
    for version in lam.list_layer_versions(LayerName=name).get("LayerVersions", []):
        lam.delete_layer_version(LayerName=name, VersionNumber=version["Version"])
