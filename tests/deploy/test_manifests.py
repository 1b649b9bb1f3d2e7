"""``docker/k8s`` and ``docker/docker-compose.yml``: valid, and in agreement with the image.

Every Kubernetes manifest validates strictly (no unknown field) against the schemas of the oldest
and newest Kubernetes versions ``kubernetes-validate`` ships, offline. KServe's InferenceService
is a custom resource with no schema there: its predictor's pod fields are validated as a Pod's
spec. Then what no schema knows: the ports, probes, user and drain timing the manifests assume
are the image's and the server's.
"""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate import utils as validate_utils

from serving import cli
from serving.resources import drain

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "docker" / "k8s"
DOCKERFILE = (REPO / "docker" / "Dockerfile").read_text()
SHIPPED = sorted({v for v in validate_utils.all_versions()}, key=lambda v: tuple(map(int, v.split("."))))
VERSIONS = (SHIPPED[0], SHIPPED[-1])
KSERVE_FIELDS = (  # PredictorSpec's own fields beside the pod spec it embeds
    "minReplicas",
    "maxReplicas",
    "scaleTarget",
    "scaleMetric",
    "scaleMetricType",
    "containerConcurrency",
    "timeout",
    "canaryTrafficPercent",
    "logger",
    "batcher",
    "labels",
    "annotations",
    "deploymentStrategy",
)


def manifests() -> dict[str, dict]:
    """Every document of docker/k8s, by kind."""
    found = {}
    for path in sorted(K8S.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            assert document["kind"] not in found, f"two {document['kind']} documents"
            found[document["kind"]] = document
    return found


MANIFESTS = manifests()
CUSTOM_KINDS = ("InferenceService", "ServingRuntime")  # KServe's custom resources
CORE_KINDS = sorted(kind for kind in MANIFESTS if kind not in CUSTOM_KINDS)
SERVING_RUNTIME_CRD = Path(__file__).resolve().parent / "schemas" / "serving.kserve.io_servingruntimes.yaml"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", CORE_KINDS)
def test_manifest_validates_against_the_kubernetes_schema(kind, version):
    kubernetes_validate.validate(MANIFESTS[kind], version, strict=True)


def test_expected_manifests_are_there():
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "InferenceService", "ServingRuntime"} <= set(
        MANIFESTS
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_kserve_predictor_is_a_valid_pod_spec(version):
    service = MANIFESTS["InferenceService"]
    assert service["apiVersion"] == "serving.kserve.io/v1beta1"
    predictor = dict(service["spec"]["predictor"])
    pod_spec = {k: v for k, v in predictor.items() if k not in KSERVE_FIELDS}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "predictor"}, "spec": pod_spec}
    kubernetes_validate.validate(pod, version, strict=True)
    (container,) = pod_spec["containers"]
    assert container["name"] == "kserve-container"  # KServe's name for a custom predictor
    assert [p["containerPort"] for p in container["ports"]] == [8501]  # KServe routes HTTP here
    assert "--model_base_path=/mnt/models" in container["args"]  # where STORAGE_URI is copied


def serving_runtime_schema() -> dict:
    (crd,) = [d for d in yaml.safe_load_all(SERVING_RUNTIME_CRD.read_text()) if d]
    assert crd["spec"]["names"]["kind"] == "ServingRuntime"
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]


def pruned_fields(value, schema: dict, path: str = "") -> list[str]:
    """What the API server would drop from ``value`` as unknown to ``schema`` (a structural
    schema prunes every field its ``properties`` do not name)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict):
        if "properties" not in schema:
            extra = schema.get("additionalProperties")
            return (
                []
                if extra is None
                else [p for k, v in value.items() for p in pruned_fields(v, extra, f"{path}.{k}")]
            )
        found = []
        for key, item in value.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += pruned_fields(item, schema["properties"][key], f"{path}.{key}")
        return found
    if isinstance(value, list) and "items" in schema:
        return [
            p for i, item in enumerate(value) for p in pruned_fields(item, schema["items"], f"{path}[{i}]")
        ]
    return []


@pytest.mark.parametrize("version", VERSIONS)
def test_kserve_serving_runtime_validates_against_kserves_crd(version):
    """docker/k8s/kserve-servingruntime.yaml: valid for KServe's published ServingRuntime schema
    (types, required fields, bounds; no field it would prune), its container a valid container,
    and what it declares is what the server does: the tensorflow model format on v1, v2 and
    grpc-v2, KServe's ports (HTTP 8080, gRPC 9000) as --rest_api_port and --port, the model where
    KServe puts it, flags the server knows, the V2 readiness probe on the REST port."""
    runtime = MANIFESTS["ServingRuntime"]
    schema = serving_runtime_schema()
    jsonschema.validate(runtime, schema)
    assert pruned_fields(runtime, schema) == []
    assert runtime["apiVersion"] == "serving.kserve.io/v1alpha1"
    spec = runtime["spec"]
    assert {(f["name"], f["version"]) for f in spec["supportedModelFormats"]} == {
        ("tensorflow", "1"),
        ("tensorflow", "2"),
    }
    assert spec["protocolVersions"] == ["v1", "v2", "grpc-v2"]
    (container,) = spec["containers"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "runtime"},
        "spec": {"containers": [container]},
    }
    kubernetes_validate.validate(pod, version, strict=True)
    args = container["args"]
    assert (flag(args, "port"), flag(args, "rest_api_port")) == ("9000", "8080")
    assert (flag(args, "model_name"), flag(args, "model_base_path")) == ("{{.Name}}", "/mnt/models")
    known = {f.name for f in cli.FLAGS}
    assert {a.split("=", 1)[0].removeprefix("--") for a in args} <= known
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 8080}
    assert spec["annotations"]["prometheus.kserve.io/port"] == "8080"


def test_the_crd_check_can_fail():
    schema = serving_runtime_schema()
    runtime = yaml.safe_load(yaml.safe_dump(MANIFESTS["ServingRuntime"]))
    runtime["spec"]["supportedModelFormats"][0]["priority"] = 0  # minimum 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(runtime, schema)
    runtime["spec"]["protocolVersion"] = ["v2"]  # a misspelt field: pruned, never read
    assert pruned_fields(runtime, schema) == [".spec.protocolVersion"]


def exposed_ports() -> set[int]:
    return {int(p) for line in re.findall(r"^EXPOSE (.+)$", DOCKERFILE, re.M) for p in line.split()}


def image_user() -> int:
    return int(re.search(r"^USER (\d+)", DOCKERFILE, re.M).group(1))


def flag(args: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in args if a.startswith(f"--{name}="))


def test_deployment_agrees_with_the_image_and_the_server():
    deployment = MANIFESTS["Deployment"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": 8500, "http": 8501} and set(ports.values()) == exposed_ports()
    # Liveness and readiness are the REST server's probes, on the REST port.
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert container[probe]["httpGet"] == {"path": path, "port": "http"}, probe
    # One worker per CPU of the limit.
    assert int(flag(container["args"], "num_workers")) == int(container["resources"]["limits"]["cpu"])
    assert pod["spec"]["securityContext"]["runAsUser"] == image_user()
    # A read-only root file system needs /tmp writable (HOME, the workers' metrics files).
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] and "emptyDir" in volumes[mounts["/tmp"]]
    assert f"/models/{next(e['value'] for e in container['env'] if e['name'] == 'MODEL_NAME')}" in mounts
    # The grace period covers the preStop sleep, the lame duck, the refusal phase and calls in flight.
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    lame_duck = float(flag(container["args"], "lame_duck_seconds"))
    in_flight = 10
    needed = pre_stop + lame_duck + drain.MAX_REFUSAL_SECONDS + in_flight
    assert pod["spec"]["terminationGracePeriodSeconds"] >= needed


def test_service_and_autoscaler_point_at_the_deployment():
    deployment, service, hpa = (
        MANIFESTS["Deployment"],
        MANIFESTS["Service"],
        MANIFESTS["HorizontalPodAutoscaler"],
    )
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    container_ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} == container_ports
    assert {p["port"] for p in service["spec"]["ports"]} == exposed_ports()
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] <= deployment["spec"]["replicas"] <= hpa["spec"]["maxReplicas"]


def test_compose_file_runs_the_image_as_tensorflow_serving_is_run():
    compose = yaml.safe_load((REPO / "docker" / "docker-compose.yml").read_text())
    (service,) = compose["services"].values()
    assert (REPO / "docker" / service["build"]["context"] / service["build"]["dockerfile"]).resolve() == (
        REPO / "docker" / "Dockerfile"
    )
    assert {int(p.split(":")[-1]) for p in service["ports"]} == exposed_ports()
    name = service["environment"]["MODEL_NAME"]
    source, target, _ = service["volumes"][0].split(":")
    assert target == f"/models/{name}"
    assert any((REPO / "docker" / source).glob("*/saved_model.pb")), source  # a real model base path
    assert service["read_only"] and "/tmp" in service["tmpfs"]
