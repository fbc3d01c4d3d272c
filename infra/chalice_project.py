"""The Chalice project a stage is deployed from, and the package pipelines deploy.

The committed ``.chalice/policy-<stage>-<function>.json`` files name the stack's resources with
CloudFormation intrinsics (``Fn::ImportValue`` of the shared stack's exports, ``Fn::Sub`` with the
account and region), which ``chalice package`` output resolves in CloudFormation. ``chalice deploy``
hands policy documents to IAM as they are, so for it the project is copied to
``build/chalice-<stage>/`` with the intrinsics resolved and the stack's outputs set as the stage's
environment variables. The repository's files are never rewritten.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from infra.cfn import Resolver

REPO = Path(__file__).resolve().parent.parent
APP_FILES = ("app.py", "requirements.txt")
APP_DIRS = ("chalicelib", "vendor")
API_FUNCTION = "api_handler"


def load_config(repo: Path = REPO) -> dict[str, Any]:
    with open(repo / ".chalice" / "config.json", encoding="utf-8") as f:
        config: dict[str, Any] = json.load(f)
    return config


def stage_functions(config: dict[str, Any], stage: str) -> list[str]:
    """The functions the stage configures (each has its own role and policy file)."""
    stages = config.get("stages", {})
    if stage not in stages:
        raise KeyError(f"stage {stage!r} is not in .chalice/config.json (stages: {sorted(stages)})")
    return list(stages[stage].get("lambda_functions", {}))


def policy_path(config: dict[str, Any], stage: str, function: str, repo: Path = REPO) -> Path:
    settings = config["stages"][stage]["lambda_functions"][function]
    return repo / ".chalice" / str(settings["iam_policy_file"])


def function_name(config: dict[str, Any], stage: str, function: str) -> str:
    """The deployed Lambda name. Chalice names the API handler ``<app>-<stage>`` (no suffix)."""
    if function == API_FUNCTION:
        return f"{config['app_name']}-{stage}"
    return f"{config['app_name']}-{stage}-{function}"


def stage_environment(template: dict[str, Any], outputs: dict[str, str]) -> dict[str, str]:
    """Environment variables the app reads, from the stack outputs the template maps them to."""
    mapping = template["Metadata"]["ServerlessBroker"]["Environment"]
    return {var: outputs[output] for var, output in mapping.items()}


def render_policy(document: Any, resolver: Resolver) -> dict[str, Any]:
    rendered = resolver.resolve(document)
    text = json.dumps(rendered)
    if "Fn::" in text or '"Ref"' in text or "${" in text:
        raise ValueError(f"unresolved intrinsic left in policy: {text[:200]}")
    return dict(rendered)


# The powertools Tracer's X-Ray SDK, for the Lambda runtime's Python, in the package's vendor/
# (Chalice adds it as is). Not in requirements.txt: there it pulls a second botocore (21 MB) in.
TRACING_VENDOR = ("aws-xray-sdk==2.15.0", "wrapt==2.5.2")


def vendor_tracing(dest: Path) -> None:
    """Installs TRACING_VENDOR into ``dest/vendor`` as Lambda's x86_64 runtime needs them (this
    interpreter's version is the functions' runtime: Chalice takes it from the packager)."""
    vendor = dest / "vendor"
    shutil.rmtree(vendor, ignore_errors=True)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--only-binary=:all:", "--platform", "manylinux2014_x86_64",
         "--implementation", "cp", "--python-version", version, "--target", str(vendor),
         *TRACING_VENDOR],
        check=True,
    )  # fmt: skip


def copy_app(dest: Path, repo: Path = REPO) -> Path:
    """Copies what Chalice packages (app.py, chalicelib/, requirements.txt) and the config."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in APP_DIRS:
        shutil.rmtree(dest / name, ignore_errors=True)
        if (repo / name).is_dir():
            shutil.copytree(
                repo / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
    for name in APP_FILES:
        shutil.copy2(repo / name, dest / name)
    (dest / ".chalice").mkdir(exist_ok=True)
    shutil.copy2(repo / ".chalice" / "config.json", dest / ".chalice" / "config.json")
    return dest


def prepare(
    dest: Path,
    stage: str,
    environment: dict[str, str],
    resolver: Resolver,
    repo: Path = REPO,
    layers: list[str] | None = None,
) -> Path:
    """Copies the app into ``dest`` with a generated config and resolved policy files (and
    ``layers``, ARNs, on every function of the stage)."""
    config = load_config(repo)
    functions = stage_functions(config, stage)
    copy_app(dest, repo)
    vendor_tracing(dest)
    chalice_dir = dest / ".chalice"
    for function in functions:
        source = policy_path(config, stage, function, repo)
        with open(source, encoding="utf-8") as f:
            document = json.load(f)
        rendered = render_policy(document, resolver)
        (chalice_dir / source.name).write_text(json.dumps(rendered, indent=2) + "\n")
    generated = copy.deepcopy(config)
    generated["stages"][stage].setdefault("environment_variables", {}).update(environment)
    if layers:
        generated["stages"][stage]["layers"] = list(layers)
    (chalice_dir / "config.json").write_text(json.dumps(generated, indent=2) + "\n")
    return dest


def patch_package(
    sam: dict[str, Any],
    config: dict[str, Any],
    stage: str,
    template: dict[str, Any],
    public_url: str | None = None,
) -> dict[str, Any]:
    """Makes ``chalice package`` output deployable next to the shared stack.

    Functions get their Chalice names (``<app>-<stage>-<function>``: the stack pre-creates their
    log groups and the control plane targets them by name), and every environment variable the
    stack exports is imported from it, so the package holds no account-specific value. The REST
    API answers unknown paths with a 404 problem (``infra/gateway_responses.py``), and has its
    stage's throttling and JSON access logs (``infra/api_protection.py``).
    """
    from chalice.utils import to_cfn_resource_name

    from infra import api_protection, function_url, gateway_responses, spool_layer

    app = config["app_name"]
    outputs = template["Outputs"]
    imported: dict[str, Any] = {
        var: {"Fn::ImportValue": f"{app}-{stage}-{output}"}
        for var, output in template["Metadata"]["ServerlessBroker"]["Environment"].items()
        if "Export" in outputs[output]
    }
    if public_url:
        imported["BROKER_PUBLIC_URL"] = public_url.rstrip("/")
    from infra import target_policy  # the ARNs the stage delivers to (docs/targets.md)

    imported.update(target_policy.environment(config, stage))
    from infra import source_policy  # what IntegrationSources may read (docs/sources.md)

    imported.update(source_policy.environment(config, stage))
    patched = copy.deepcopy(sam)
    spool = spool_layer.carrying(config, stage)  # the carry spool's extension (docs/cost.md)
    if spool:
        patched["Resources"].update(spool_layer.sam_resources(app, stage))
    for function in [API_FUNCTION, *stage_functions(config, stage)]:
        logical_id = "APIHandler" if function == API_FUNCTION else to_cfn_resource_name(function)
        resource = patched["Resources"].get(logical_id)
        if resource is None:  # configured but not (yet) defined in app.py
            continue
        props = resource["Properties"]
        props["FunctionName"] = function_name(config, stage, function)
        props.setdefault("Environment", {}).setdefault("Variables", {}).update(imported)
        if spool:
            spool_layer.attach(resource)
    api = patched["Resources"].get("RestAPI")
    if api is not None:
        definition = api["Properties"]["DefinitionBody"]
        definition["x-amazon-apigateway-gateway-responses"] = gateway_responses.swagger_extension()
        log_group = {"Fn::ImportValue": f"{app}-{stage}-{api_protection.ACCESS_LOG_EXPORT}"}
        protection = api_protection.ApiProtection.of_stage(config, stage)
        api["Properties"].update(protection.sam_properties(log_group))
    if "APIHandler" in patched["Resources"]:  # the cheaper ingress (infra/function_url.py)
        url = function_url.FunctionUrl.of_stage(config, stage)
        api_props = patched["Resources"]["APIHandler"]["Properties"]
        api_props.setdefault("Environment", {}).setdefault("Variables", {}).update(
            url.environment()
        )
        patched["Resources"].update(url.sam_resources("APIHandler"))
        patched.setdefault("Outputs", {}).update(url.sam_output())
    return patched
