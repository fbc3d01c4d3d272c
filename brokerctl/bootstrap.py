"""Create, on the AWS endpoint, the shared resources the stack declares (infra/declarations.py),
plus the Lambda functions event source mappings point at. Idempotent."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from typing import Any

from chalicelib.adapters.aws_clients import AwsClients
from chalicelib.adapters.aws_errors import error_code
from chalicelib.config import ConfigurationError, Settings
from infra.declarations import Declarations, local_declarations

_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": ["lambda.amazonaws.com", "firehose.amazonaws.com"]},
            "Action": "sts:AssumeRole",
        }
    ],
}


def bootstrap(settings: Settings, clients: AwsClients, say: Callable[[str], None] = print) -> None:
    if not settings.local_mode:
        # Deployed stages get their resources from infra/ (CloudFormation); creating them here
        # by hand against a real account would be a second, drifting copy.
        raise ConfigurationError("bootstrap creates local-mode resources only (local_mode false)")
    account = clients.client("sts").get_caller_identity()["Account"]
    decl = local_declarations(settings, account_id=account)
    _table(decl, clients, say)
    _buckets(decl, clients, say)
    role_arn = _role(decl, clients)
    _stream(decl, clients, say)
    _functions(decl, clients, role_arn, say)
    _signing_key(decl, clients, say)


def _ignore_exists(fn: Callable[[], Any], *codes: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        fn()
        return True
    except ClientError as exc:
        if error_code(exc) in codes:
            return False
        raise


def _table(decl: Declarations, clients: AwsClients, say: Callable[[str], None]) -> None:
    ddb = clients.client("dynamodb")
    name = decl.table["TableName"]
    if _ignore_exists(lambda: ddb.create_table(**decl.table), "ResourceInUseException"):
        ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})
        if decl.table_ttl_attribute:
            ddb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={
                    "Enabled": True,
                    "AttributeName": decl.table_ttl_attribute,
                },
            )
        say(f"created table {name}")


def _buckets(decl: Declarations, clients: AwsClients, say: Callable[[str], None]) -> None:
    s3 = clients.client("s3")
    for bucket in decl.buckets:
        if _ignore_exists(
            lambda b=bucket: s3.create_bucket(Bucket=b),  # type: ignore[misc]
            "BucketAlreadyOwnedByYou",
            "BucketAlreadyExists",
        ):
            say(f"created bucket {bucket}")


def _role(decl: Declarations, clients: AwsClients) -> str:
    iam = clients.client("iam")
    _ignore_exists(
        lambda: iam.create_role(
            RoleName=decl.role_name, AssumeRolePolicyDocument=json.dumps(_TRUST)
        ),
        "EntityAlreadyExists",
    )
    return str(iam.get_role(RoleName=decl.role_name)["Role"]["Arn"])


def _stream(decl: Declarations, clients: AwsClients, say: Callable[[str], None]) -> None:
    firehose = clients.client("firehose")
    name = decl.stream["DeliveryStreamName"]
    if _ignore_exists(
        lambda: firehose.create_delivery_stream(**decl.stream), "ResourceInUseException"
    ):
        say(f"created delivery stream {name}")


# The stand-in's handler exists, and says what is going on if an emulator ever invokes it: the
# event source mappings local mode creates on an external endpoint are disabled (nothing there
# consumes the queues), so nothing should.
_STAND_IN = """def handler(event, context):
    raise RuntimeError(
        "this function runs in the process of `brokerctl dev`, not here; its event source "
        "mappings are meant to stay disabled on this endpoint"
    )
"""


def _placeholder_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("app.py", _STAND_IN)
    return buf.getvalue()


def _functions(
    decl: Declarations, clients: AwsClients, role_arn: str, say: Callable[[str], None]
) -> None:
    lam = clients.client("lambda")
    code = _placeholder_zip()
    for name in decl.functions:
        if _ignore_exists(
            lambda n=name: lam.create_function(  # type: ignore[misc]
                FunctionName=n,
                Runtime="python3.11",
                Role=role_arn,
                Handler="app.handler",
                Code={"ZipFile": code},
                Timeout=60,
            ),
            "ResourceConflictException",
        ):
            say(f"registered function {name}")


def _signing_key(decl: Declarations, clients: AwsClients, say: Callable[[str], None]) -> None:
    """The key that signs delivery tokens (design.md §2.5), made once: at first start, the alias
    does not exist yet; later starts find it (the endpoint keeps it while it runs)."""
    kms = clients.client("kms")
    try:
        kms.describe_key(KeyId=decl.signing_alias)
        return
    except Exception as exc:
        if error_code(exc) != "NotFoundException":
            raise
    key = kms.create_key(**decl.signing_key)["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName=decl.signing_alias, TargetKeyId=key)
    say(f"created signing key {decl.signing_alias}")
