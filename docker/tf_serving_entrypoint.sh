#!/bin/sh
# tensorflow/serving's entrypoint: its flags from MODEL_NAME and MODEL_BASE_PATH, then the arguments
# of `docker run` (a later flag wins). `exec`: the server replaces this shell as PID 1 and so
# receives docker stop's SIGTERM itself, and drains (TF Serving's script does not exec: its
# shell ignores SIGTERM and docker kills the server after 10 s).
set -e
exec tensorflow_model_server --port=8500 --rest_api_port=8501 \
    --model_name="${MODEL_NAME}" --model_base_path="${MODEL_BASE_PATH}/${MODEL_NAME}" "$@"
