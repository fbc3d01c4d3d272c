"""The deploy script's answers to a newcomer's mistakes: one line each, no traceback."""

from __future__ import annotations

from typing import Any

import pytest


def test_a_package_without_a_public_url_is_refused_in_one_line(tmp_path: Any) -> None:
    from infra import deploy

    with pytest.raises(SystemExit) as refused:
        deploy.main(["--stage", "prod", "--package-only", "--out", str(tmp_path)])
    message = str(refused.value)
    assert "--public-url" in message and "\n" not in message
    assert not any(tmp_path.iterdir())


def test_missing_credentials_are_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from infra import deploy

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_ENDPOINT_URL"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert deploy.main(["--stage", "prod", "--region", "us-east-1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: AWS credentials are missing") and "\n" not in err
    assert "NoCredentialsError" in err


def test_expired_credentials_are_named() -> None:
    from botocore.exceptions import ClientError

    from infra.deploy import credentials_problem

    expired = ClientError({"Error": {"Code": "ExpiredToken", "Message": "x"}}, "GetCallerIdentity")
    assert "ExpiredToken" in (credentials_problem(expired) or "")
    other = ClientError({"Error": {"Code": "AccessDenied", "Message": "x"}}, "CreateStack")
    assert credentials_problem(other) is None
    assert credentials_problem(ValueError("x")) is None
