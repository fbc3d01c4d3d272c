"""CloudFormation templates as data: a YAML loader that keeps the short-form intrinsics (``!Ref``,
``!Sub``, ...) in their long form, and a resolver for the intrinsics our templates and the
``.chalice`` policy files use, so that local mode, tests and the deploy script read the same
declarations AWS does.

The resolver knows the physical names and ARNs of the resource types the template declares (they
all have explicit names); anything else raises ``UnresolvableError`` rather than guessing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import yaml

TEMPLATE_PATH = Path(__file__).with_name("template.yaml")

_TAGS = (
    "Ref", "Condition", "Sub", "GetAtt", "If", "Equals", "Not", "And", "Or", "Join", "Select",
    "Split", "FindInMap", "ImportValue", "Base64", "GetAZs", "Cidr", "Length", "ToJsonString",
)  # fmt: skip


class UnresolvableError(ValueError):
    """An intrinsic the resolver cannot evaluate offline (unknown name, type it does not model)."""


class _Loader(yaml.SafeLoader):  # type: ignore[misc,unused-ignore]
    pass


def _intrinsic(tag: str) -> Any:
    key = tag if tag in {"Ref", "Condition"} else f"Fn::{tag}"

    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        value: Any
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
            if tag == "GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {key: value}

    return construct


for _tag in _TAGS:
    _Loader.add_constructor(f"!{_tag}", _intrinsic(_tag))


def load_template(path: Path | str = TEMPLATE_PATH) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data = yaml.load(f, Loader=_Loader)  # a SafeLoader with the intrinsic tags added
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a CloudFormation template")
    return data


_NO_VALUE = object()
_SUB_VAR = re.compile(r"\$\{([^}]*)\}")

# Per resource type: the property holding its name, its Ref, and its ARN (GetAtt Arn).
_NAMES: dict[str, tuple[str, str, str | None]] = {
    "AWS::DynamoDB::Table": ("TableName", "{name}", "arn:{p}:dynamodb:{r}:{a}:table/{name}"),
    "AWS::S3::Bucket": ("BucketName", "{name}", "arn:{p}:s3:::{name}"),
    "AWS::IAM::Role": ("RoleName", "{name}", "arn:{p}:iam::{a}:role/{name}"),
    "AWS::KinesisFirehose::DeliveryStream": (
        "DeliveryStreamName",
        "{name}",
        "arn:{p}:firehose:{r}:{a}:deliverystream/{name}",
    ),
    "AWS::Logs::LogGroup": ("LogGroupName", "{name}", "arn:{p}:logs:{r}:{a}:log-group:{name}:*"),
    "AWS::Logs::LogStream": ("LogStreamName", "{name}", None),
    "AWS::Glue::Job": ("Name", "{name}", None),
    "AWS::Glue::Trigger": ("Name", "{name}", None),
    "AWS::SNS::Topic": ("TopicName", "arn:{p}:sns:{r}:{a}:{name}", "arn:{p}:sns:{r}:{a}:{name}"),
    "AWS::Events::Rule": ("Name", "{name}", "arn:{p}:events:{r}:{a}:rule/{name}"),
    "AWS::CloudWatch::Alarm": ("AlarmName", "{name}", "arn:{p}:cloudwatch:{r}:{a}:alarm:{name}"),
    "AWS::CloudWatch::Dashboard": ("DashboardName", "{name}", None),
    "AWS::KMS::Alias": ("AliasName", "{name}", None),
}
# Resources whose id the service generates: offline, a Ref names the logical id in a form no
# service accepts (the template's only such reference is its alias's TargetKeyId, which
# CloudFormation resolves itself; local mode finds the key by its alias).
_GENERATED = {"AWS::KMS::Key": "{{generated id of {logical_id}}}"}


class Resolver:
    """Evaluates intrinsics for one stack: its parameters, account, region and exports.

    ``names`` overrides the physical name of resources by logical id (the local stage uses the
    names Settings carries, which may come from the environment).
    """

    def __init__(
        self,
        template: Mapping[str, Any],
        parameters: Mapping[str, Any] | None = None,
        *,
        account_id: str = "123456789012",
        region: str = "us-east-1",
        stack_name: str = "serverless-broker",
        imports: Mapping[str, str] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> None:
        self.template = template
        self.resources: Mapping[str, Any] = template.get("Resources", {})
        self.pseudo = {
            "AWS::AccountId": account_id,
            "AWS::Region": region,
            "AWS::Partition": "aws",
            "AWS::StackName": stack_name,
            "AWS::URLSuffix": "amazonaws.com",
        }
        self.imports = dict(imports or {})
        self.names = dict(names or {})
        self.parameters = self._parameters(dict(parameters or {}))
        self._conditions: dict[str, bool] = {}

    def _parameters(self, given: dict[str, Any]) -> dict[str, Any]:
        declared = self.template.get("Parameters", {})
        unknown = set(given) - set(declared)
        if unknown:
            raise UnresolvableError(f"unknown parameters: {sorted(unknown)}")
        values: dict[str, Any] = {}
        for name, spec in declared.items():
            if name in given:
                raw = given[name]
            elif "Default" in spec:
                raw = spec["Default"]
            else:
                raise UnresolvableError(f"parameter {name} has no value and no default")
            values[name] = _typed(raw, spec.get("Type", "String"))
        return values

    # ------------------------------------------------------------------ public helpers
    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            spec = self.template.get("Conditions", {}).get(name)
            if spec is None:
                raise UnresolvableError(f"unknown condition {name}")
            self._conditions[name] = bool(self.resolve(spec))
        return self._conditions[name]

    def properties(self, logical_id: str) -> dict[str, Any]:
        """A resource's properties with every intrinsic evaluated (and its name overridden)."""
        resource = self._resource(logical_id)
        props = self.resolve(resource.get("Properties", {}))
        name_key = _NAMES.get(resource["Type"], (None,))[0]
        if name_key and logical_id in self.names:
            props[name_key] = self.names[logical_id]
        return dict(props)

    def ref(self, logical_id: str) -> Any:
        if logical_id in self.parameters:
            return self.parameters[logical_id]
        if logical_id in self.pseudo:
            return self.pseudo[logical_id]
        if logical_id == "AWS::NoValue":
            return _NO_VALUE
        generated = _GENERATED.get(self._resource(logical_id)["Type"])
        if generated is not None:
            return generated.format(logical_id=logical_id)
        name, ref_fmt, _ = self._name(logical_id)
        return self._fmt(ref_fmt, name)

    def get_att(self, logical_id: str, attribute: str) -> str:
        name, _, arn_fmt = self._name(logical_id)
        if attribute == "Arn" and arn_fmt:
            return self._fmt(arn_fmt, name)
        if attribute in {"TopicName", "Name"}:
            return name
        raise UnresolvableError(f"{logical_id}.{attribute} is not modelled")

    def outputs(self) -> dict[str, Any]:
        out = {}
        for key, spec in self.template.get("Outputs", {}).items():
            if "Condition" in spec and not self.condition(spec["Condition"]):
                continue
            out[key] = self.resolve(spec["Value"])
        return out

    def exports(self) -> dict[str, Any]:
        out = {}
        for spec in self.template.get("Outputs", {}).values():
            if "Export" in spec:
                out[self.resolve(spec["Export"]["Name"])] = self.resolve(spec["Value"])
        return out

    # ------------------------------------------------------------------ evaluation
    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            items = [self.resolve(item) for item in node]
            return [item for item in items if item is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            handler = self._INTRINSICS.get(key)
            if handler is not None:
                return handler(self, arg)
        resolved = {k: self.resolve(v) for k, v in node.items()}
        return {k: v for k, v in resolved.items() if v is not _NO_VALUE}

    def _ref(self, arg: str) -> Any:
        return self.ref(arg)

    def _get_att(self, arg: list[str]) -> str:
        return self.get_att(arg[0], arg[1])

    def _sub(self, arg: Any) -> str:
        if isinstance(arg, str):
            text, variables = arg, {}
        else:
            text, variables = arg[0], {k: self.resolve(v) for k, v in arg[1].items()}

        def replace(match: re.Match[str]) -> str:
            expr = match.group(1)
            if expr.startswith("!"):
                return "${" + expr[1:] + "}"
            if expr in variables:
                return str(variables[expr])
            if "." in expr and expr.split(".", 1)[0] in self.resources:
                return str(self.get_att(*expr.split(".", 1)))
            return str(self.ref(expr))

        return _SUB_VAR.sub(replace, text)

    def _if(self, arg: list[Any]) -> Any:
        name, when_true, when_false = arg
        return self.resolve(when_true if self.condition(name) else when_false)

    def _equals(self, arg: list[Any]) -> bool:
        left, right = (self.resolve(a) for a in arg)
        return str(left) == str(right)

    def _not(self, arg: list[Any]) -> bool:
        return not self.resolve(arg[0])

    def _and(self, arg: list[Any]) -> bool:
        return all(self.resolve(a) for a in arg)

    def _or(self, arg: list[Any]) -> bool:
        return any(self.resolve(a) for a in arg)

    def _condition(self, arg: str) -> bool:
        return self.condition(arg)

    def _join(self, arg: list[Any]) -> str:
        sep, items = arg
        return str(sep).join(str(i) for i in self.resolve(items))

    def _select(self, arg: list[Any]) -> Any:
        index, items = arg
        return self.resolve(items)[int(self.resolve(index))]

    def _split(self, arg: list[Any]) -> list[str]:
        sep, text = arg
        return str(self.resolve(text)).split(sep)

    def _find_in_map(self, arg: list[Any]) -> Any:
        name, top, second = (self.resolve(a) for a in arg[:3])
        return self.template["Mappings"][name][top][second]

    def _import_value(self, arg: Any) -> Any:
        name = self.resolve(arg)
        if name not in self.imports:
            raise UnresolvableError(f"no export named {name}")
        return self.imports[name]

    _INTRINSICS: ClassVar[dict[str, Any]] = {
        "Ref": _ref,
        "Fn::GetAtt": _get_att,
        "Fn::Sub": _sub,
        "Fn::If": _if,
        "Fn::Equals": _equals,
        "Fn::Not": _not,
        "Fn::And": _and,
        "Fn::Or": _or,
        "Condition": _condition,
        "Fn::Join": _join,
        "Fn::Select": _select,
        "Fn::Split": _split,
        "Fn::FindInMap": _find_in_map,
        "Fn::ImportValue": _import_value,
    }

    # ------------------------------------------------------------------ names
    def _resource(self, logical_id: str) -> Mapping[str, Any]:
        resource = self.resources.get(logical_id)
        if resource is None:
            raise UnresolvableError(f"unknown parameter or resource {logical_id}")
        return resource  # type: ignore[no-any-return]

    def _name(self, logical_id: str) -> tuple[str, str, str | None]:
        resource = self._resource(logical_id)
        known = _NAMES.get(resource["Type"])
        if known is None:
            raise UnresolvableError(f"{logical_id} ({resource['Type']}) is not modelled")
        name_key, ref_fmt, arn_fmt = known
        if logical_id in self.names:
            return self.names[logical_id], ref_fmt, arn_fmt
        raw = resource.get("Properties", {}).get(name_key)
        if raw is None:
            raise UnresolvableError(f"{logical_id} has no explicit {name_key}")
        return str(self.resolve(raw)), ref_fmt, arn_fmt

    def _fmt(self, fmt: str, name: str) -> str:
        return fmt.format(
            name=name,
            p=self.pseudo["AWS::Partition"],
            r=self.pseudo["AWS::Region"],
            a=self.pseudo["AWS::AccountId"],
        )


def _typed(value: Any, cfn_type: str) -> Any:
    if cfn_type == "Number":
        number = float(value)
        return int(number) if number.is_integer() else number
    if cfn_type.startswith("List<") or cfn_type == "CommaDelimitedList":
        return value if isinstance(value, list) else str(value).split(",")
    return str(value)
