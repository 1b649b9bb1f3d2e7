"""The Open Inference Protocol (KServe V2), transport-free: what a V2 request asks and answers.

``datatypes`` maps V2 datatypes to TF dtypes and reads and writes tensors in each of the
protocol's forms; ``infer`` turns a ModelInfer into the PredictRequest every transport's Predict
becomes (``serving.inference.request_functions``), so batching, metrics, the request log and
admission apply unchanged; ``models`` answers health, readiness and metadata from the
ServerCore. The front ends (``serving.rest_api.open_inference``, ``serving.grpc_api.open_inference``)
only parse and write their wire format. May import inference, lifecycle and below; never a
front end.
"""
