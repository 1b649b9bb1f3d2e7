"""Inference on a loaded SavedModel, without a transport (TF Serving's servables/tensorflow/):
the signatures, the TensorProto codec, Predict, Classify, Regress, MultiInference, metadata,
warmup, the bundles the lifecycle loads, and ``request_functions``, the one set of functions
every transport and protocol calls.

Imports the lifecycle and what lies below it; never a front end.
"""
