"""AWS Signature Version 4 for a Connection's ``awsSigV4`` (docs/targets.md): botocore's own
SigV4Auth with the function's credentials (the Lambda role's, refreshed by botocore as they
expire), as Function URLs on AWS_IAM, API Gateway IAM and VPC Lattice verify it."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any


class BotocoreSigner:
    def __init__(self) -> None:
        self._credentials: Any = None
        self._lock = threading.Lock()

    def sign(
        self, url: str, headers: Mapping[str, str], body: bytes, service: str, region: str
    ) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
        SigV4Auth(self._frozen(), service, region).add_auth(request)
        return {str(k): str(v) for k, v in request.headers.items()}

    def _frozen(self) -> Any:
        with self._lock:
            if self._credentials is None:
                import botocore.session

                self._credentials = botocore.session.get_session().get_credentials()
            if self._credentials is None:
                raise RuntimeError("no AWS credentials to sign with")
            return self._credentials.get_frozen_credentials()
