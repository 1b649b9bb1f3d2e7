"""Drive model_server's Open Inference Protocol with NVIDIA's and KServe's clients, unchanged.

Run in the v2clients venv (``python drive.py triton|kserve PLAN.json OUT_DIR``), outside the
repository: only ``tritonclient`` or ``kserve`` speaks to the server. One process per client
family: both register the protocol's ``inference.*`` proto names, which one process cannot
hold twice. PLAN holds the server's addresses, the inference cases (model, version, parameters, inputs as .npy files, outputs asked for) and the
error cases. OUT_DIR gets ``results.json`` (health, metadata, errors, and per case and client
the output names, datatypes and shapes) and ``outputs.npz`` (every output array, keyed
``client/case/output``). The test compares them with TensorFlow's outputs.
"""

import asyncio
import json
import sys
from pathlib import Path

import numpy as np

FAMILY = sys.argv[1] if __name__ == "__main__" else ""
if FAMILY == "triton":
    import tritonclient.grpc as triton_grpc
    import tritonclient.http as triton_http
    from tritonclient.utils import InferenceServerException
elif FAMILY == "kserve":
    import kserve
    from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig
    from kserve.protocol.infer_type import RequestedOutput


def load(case):
    arrays = {}
    for name, spec in case["inputs"].items():
        array = np.load(spec["npy"], allow_pickle=True)
        if spec["datatype"] == "BF16":  # (saved as its bits: .npy has no bfloat16)
            import ml_dtypes

            array = array.view(ml_dtypes.bfloat16)
        arrays[name] = array
    return arrays


def triton_inputs(module, case, arrays, binary):
    inputs = []
    for name, spec in case["inputs"].items():
        array = arrays[name]
        tensor = module.InferInput(name, list(array.shape), spec["datatype"])
        if module is triton_http:
            tensor.set_data_from_numpy(array, binary_data=binary or spec["datatype"] == "BF16")
        else:
            tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def triton_outputs(module, case, binary):
    if case.get("outputs") is None:
        return None
    if module is triton_http:
        return [triton_http.InferRequestedOutput(name, binary_data=binary) for name in case["outputs"]]
    return [triton_grpc.InferRequestedOutput(name) for name in case["outputs"]]


def record_result(results, arrays, client, case_id, outputs):
    results["cases"].setdefault(case_id, {})[client] = [
        [o["name"], o["datatype"], o["shape"]] for o in outputs
    ]
    for o in outputs:
        arrays[f"{client}/{case_id}/{o['name']}"] = o["array"]


def triton_infer(module, client, case, binary):
    arrays = load(case)
    result = client.infer(
        case["model"],
        triton_inputs(module, case, arrays, binary),
        model_version=case.get("version", ""),
        outputs=triton_outputs(module, case, binary),
        request_id=case["id"],
        parameters=case.get("parameters"),
    )
    response = result.get_response()
    if module is triton_http:
        described, version, rid = response["outputs"], response["model_version"], response.get("id")
        described = [{"name": o["name"], "datatype": o["datatype"], "shape": o["shape"]} for o in described]
    else:
        described = [
            {"name": o.name, "datatype": o.datatype, "shape": list(o.shape)} for o in response.outputs
        ]
        version, rid = response.model_version, response.id
    for o in described:
        o["array"] = result.as_numpy(o["name"])
    return described, version, rid


async def kserve_infer(rest, grpc_client, base_url, case, use_grpc, binary):
    arrays = load(case)
    inputs = []
    for name, spec in case["inputs"].items():
        tensor = InferInput(name, list(arrays[name].shape), spec["datatype"])
        tensor.set_data_from_numpy(arrays[name], binary_data=binary)
        inputs.append(tensor)
    outputs = None
    if case.get("outputs") is not None:
        outputs = [RequestedOutput(name, {"binary_data": binary}) for name in case["outputs"]]
    request = InferRequest(
        case["model"],
        inputs,
        request_id=case["id"],
        parameters=case.get("parameters"),
        request_outputs=outputs,
        model_version=case.get("version") or None,
    )
    if use_grpc:
        response = await grpc_client.infer(request)
    else:
        response = await rest.infer(base_url, request, model_name=case["model"])
    described = [
        {"name": o.name, "datatype": o.datatype, "shape": list(o.shape), "array": o.as_numpy()}
        for o in response.outputs
    ]
    return described, response.model_version, response.id


def error_of(call):
    try:
        call()
    except InferenceServerException as e:
        return {"status": str(e.status()), "message": e.message()}
    return {"status": "OK"}


async def run_kserve(plan, results, arrays):
    base_url = "http://" + plan["http"]
    rest = InferenceRESTClient(RESTConfig(protocol="v2", retries=0))
    grpc_client = InferenceGRPCClient(plan["grpc"])
    results["kserve"] = {
        "rest_live": await rest.is_server_live(base_url),
        "rest_ready": await rest.is_server_ready(base_url),
        "rest_model_ready": await rest.is_model_ready(base_url, plan["ready_model"]),
        "rest_unknown_ready": await rest.is_model_ready(base_url, "no_such_model"),
        "grpc_live": await grpc_client.is_server_live(),
        "grpc_ready": await grpc_client.is_server_ready(),
        "grpc_model_ready": await grpc_client.is_model_ready(plan["ready_model"]),
        "version": kserve.__version__ if hasattr(kserve, "__version__") else "",
    }
    for case in plan["cases"]:
        if any(s["datatype"] == "BF16" for s in case["inputs"].values()):
            continue  # KServe's client makes no BF16 tensor from numpy (tritonclient does)
        for client, use_grpc, binary in (
            ("kserve_rest_json", False, False),
            ("kserve_rest_binary", False, True),
            ("kserve_grpc", True, False),
        ):
            described, version, rid = await kserve_infer(rest, grpc_client, base_url, case, use_grpc, binary)
            assert rid == case["id"], (client, rid)
            record_result(results, arrays, client, case["id"], described)
            results["versions"].setdefault(case["id"], {})[client] = version
    await rest.close()
    await grpc_client.close()


def main():
    plan = json.loads(Path(sys.argv[2]).read_text())
    out = Path(sys.argv[3])
    results = {"cases": {}, "versions": {}, "errors": {}}
    arrays = {}
    if FAMILY == "kserve":
        asyncio.run(run_kserve(plan, results, arrays))
    else:
        run_triton(plan, results, arrays)
    (out / "results.json").write_text(json.dumps(results))
    np.savez(
        out / "outputs.npz",
        **{k: (v.astype(np.float32) if v.dtype.name == "bfloat16" else v) for k, v in arrays.items()},
    )


def run_triton(plan, results, arrays):
    clients = {
        "http": triton_http.InferenceServerClient(plan["http"]),
        "grpc": triton_grpc.InferenceServerClient(plan["grpc"]),
    }
    for kind, client in clients.items():
        model = plan["ready_model"]
        results[kind] = {
            "live": client.is_server_live(),
            "ready": client.is_server_ready(),
            "model_ready": client.is_model_ready(model),
            "version_ready": client.is_model_ready(model, plan["ready_version"]),
            "server_metadata": _plain(client.get_server_metadata()),
            "model_metadata": {
                name: _plain(client.get_model_metadata(name)) for name in plan["metadata_models"]
            },
        }
    for case in plan["cases"]:
        modes = (
            ("triton_http_binary", "http", True),
            ("triton_http_json", "http", False),
            ("triton_grpc", "grpc", False),
        )
        for name, kind, binary in modes:
            if (
                kind == "http"
                and not binary
                and any(s["datatype"] == "BF16" for s in case["inputs"].values())
            ):
                continue  # BF16 has no JSON form
            described, version, rid = triton_infer(
                triton_http if kind == "http" else triton_grpc, clients[kind], case, binary
            )
            assert rid == case["id"], (name, rid)
            record_result(results, arrays, name, case["id"], described)
            results["versions"].setdefault(case["id"], {})[name] = version
    for case in plan["errors"]:
        for kind in ("http", "grpc"):
            module = triton_http if kind == "http" else triton_grpc
            client = clients[kind]
            if case.get("call") == "ready":
                results["errors"].setdefault(case["id"], {})[kind] = error_of(
                    lambda c=client, e=case: c.get_model_metadata(e["model"], e.get("version", ""))
                )
                continue
            results["errors"].setdefault(case["id"], {})[kind] = error_of(
                lambda m=module, c=client, e=case: triton_infer(m, c, e, True)
            )


def _plain(value):
    if isinstance(value, dict):
        return value
    from google.protobuf import json_format

    return json_format.MessageToDict(value, preserving_proto_field_name=True)


if __name__ == "__main__":
    main()
