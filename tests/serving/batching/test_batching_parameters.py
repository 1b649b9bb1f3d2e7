"""BatchingParameters: defaults, TF Serving's checks and texts, the files they come from."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from apis.tensorflow_serving.servables.tensorflow.session_bundle_config_pb2 import BatchingParameters
from runtime import errors
from serving.batching import parameters
from serving.batching.parameters import QueueOptions, SchedulerOptions


def params(text: str) -> BatchingParameters:
    return text_format.Parse(text, BatchingParameters())


QUEUE_OPTIONS = [
    # (BatchingParameters text, the QueueOptions in force)
    ("", QueueOptions()),
    (
        "max_batch_size { value: 32 } batch_timeout_micros { value: 1000 } max_enqueued_batches { value: 4 }",
        QueueOptions(
            input_batch_size_limit=32,
            batch_timeout_micros=1000,
            max_enqueued_batches=4,
            max_execution_batch_size=32,
        ),
    ),
    (
        "max_batch_size { value: 8 } allowed_batch_sizes: 2 allowed_batch_sizes: 4 allowed_batch_sizes: 8",
        QueueOptions(input_batch_size_limit=8, max_execution_batch_size=8, allowed_batch_sizes=(2, 4, 8)),
    ),
    ("allowed_batch_sizes: 10 allowed_batch_sizes: 1000", QueueOptions(allowed_batch_sizes=(10, 1000))),
    # out of order is accepted, as by TF Serving's model server (a warning is logged)
    (
        "max_batch_size { value: 8 } allowed_batch_sizes: 4 allowed_batch_sizes: 2 allowed_batch_sizes: 8",
        QueueOptions(input_batch_size_limit=8, max_execution_batch_size=8, allowed_batch_sizes=(4, 2, 8)),
    ),
    ("pad_variable_length_inputs: true", QueueOptions(pad_variable_length_inputs=True)),
    # 0 enqueued batches means 1 without splitting (AddQueue's rewrite)
    ("max_enqueued_batches { value: 0 }", QueueOptions(max_enqueued_batches=1)),
    # splitting: max_execution_batch_size defaults to max_batch_size
    (
        "max_batch_size { value: 64 } enable_large_batch_splitting { value: true }",
        QueueOptions(
            input_batch_size_limit=64, enable_large_batch_splitting=True, max_execution_batch_size=64
        ),
    ),
    (
        "max_batch_size { value: 64 } enable_large_batch_splitting { value: true } "
        "max_execution_batch_size { value: 16 } allowed_batch_sizes: 8 allowed_batch_sizes: 64",
        QueueOptions(
            input_batch_size_limit=64,
            enable_large_batch_splitting=True,
            max_execution_batch_size=16,
            allowed_batch_sizes=(8, 64),
        ),
    ),
    # max_execution_batch_size without splitting is not used
    (
        "max_batch_size { value: 64 } max_execution_batch_size { value: 16 }",
        QueueOptions(input_batch_size_limit=64, max_execution_batch_size=64),
    ),
    ("enable_large_batch_splitting { value: false }", QueueOptions()),
]


@pytest.mark.parametrize("text, expected", QUEUE_OPTIONS)
def test_queue_options_take_tf_serving_defaults(text, expected):
    assert parameters.queue_options(params(text)) == expected


def test_adaptive_batch_timeout_is_an_option_of_ours_with_a_cap():
    options = parameters.queue_options(params(""), adaptive_batch_timeout=True)
    assert options.adaptive_batch_timeout and options.adaptive_timeout_cap_micros == 10_000
    capped = parameters.queue_options(
        params("batch_timeout_micros { value: 3000 }"), adaptive_batch_timeout=True
    )
    assert capped.adaptive_timeout_cap_micros == 3000


REFUSED = [
    # (BatchingParameters text, TF Serving's INVALID_ARGUMENT text)
    (
        "max_batch_size { value: 8 } allowed_batch_sizes: 2 allowed_batch_sizes: 4",
        "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 4; expected 8",
    ),
    (
        "allowed_batch_sizes: 2 allowed_batch_sizes: 4",
        "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 4; expected 1000",
    ),
    # with splitting too, the server checks against max_batch_size (WrapSessionForBatching)
    (
        "max_batch_size { value: 64 } enable_large_batch_splitting { value: true } "
        "max_execution_batch_size { value: 16 } allowed_batch_sizes: 8 allowed_batch_sizes: 16",
        "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 16; expected 64",
    ),
    ("max_batch_size { value: 0 }", "input_batch_size_limit must be positive; was 0"),
    ("max_batch_size { value: -3 }", "input_batch_size_limit must be positive; was -3"),
    ("batch_timeout_micros { value: -1 }", "batch_timeout_micros must be non-negative; was -1"),
    (
        "max_enqueued_batches { value: 0 } enable_large_batch_splitting { value: true }",
        "max_enqueued_batches must be positive; was 0",
    ),
    ("max_enqueued_batches { value: -2 }", "max_enqueued_batches must be positive; was -2"),
    (
        "max_batch_size { value: 16 } enable_large_batch_splitting { value: true } "
        "max_execution_batch_size { value: 32 }",
        "When enable_large_batch_splitting is true, input_batch_size_limit must be greater than or equal to "
        "max_execution_batch_size.11632",
    ),
    (
        "enable_large_batch_splitting { value: true } max_execution_batch_size { value: 0 }",
        "max_execution_batch_size must be positive; was 0",
    ),
]


@pytest.mark.parametrize("text, message", REFUSED)
def test_queue_options_refused_with_tf_serving_texts(text, message):
    with pytest.raises(errors.InvalidArgumentError) as raised:
        parameters.queue_options(params(text))
    assert raised.value.message == message


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", SchedulerOptions(4, "batch_threads")),
        ("num_batch_threads { value: 2 } thread_pool_name { value: 'pool' }", SchedulerOptions(2, "pool")),
    ],
)
def test_scheduler_options(text, expected):
    assert parameters.scheduler_options(params(text), default_threads=4) == expected


@pytest.mark.parametrize("threads", [0, -1])
def test_num_batch_threads_must_be_positive(threads):
    with pytest.raises(errors.InvalidArgumentError) as raised:
        parameters.scheduler_options(params(f"num_batch_threads {{ value: {threads} }}"), default_threads=4)
    assert raised.value.message == f"num_batch_threads must be positive; was {threads}"


def test_enable_batching_without_a_file_names_the_pool_only():
    expected = params("thread_pool_name { value: 'model_server_batch_threads' }")
    assert parameters.server_batching_parameters("") == expected


def test_batching_parameters_file_is_read(tmp_path):
    path = tmp_path / "batching.txt"
    path.write_text("max_batch_size { value: 128 }\nbatch_timeout_micros { value: 0 }\n")
    assert parameters.server_batching_parameters(str(path)) == params(
        "max_batch_size { value: 128 } batch_timeout_micros { value: 0 }"
    )


def test_bad_batching_parameters_files(tmp_path):
    with pytest.raises(errors.NotFoundError) as raised:
        parameters.read_batching_parameters(str(tmp_path / "missing.txt"))
    assert raised.value.message == f"{tmp_path / 'missing.txt'}; No such file or directory"
    bad = tmp_path / "bad.txt"
    bad.write_text("max_batch_size: 128\n")  # a wrapper field needs { value: N }
    with pytest.raises(errors.InvalidArgumentError) as raised:
        parameters.read_batching_parameters(str(bad))
    assert raised.value.message == f"Invalid protobuf file: '{bad}'"


def test_per_model_parameters(tmp_path):
    common = params("max_batch_size { value: 16 }")
    assert (
        parameters.per_model_batching_parameters(str(tmp_path), common, per_model_configured=False) is common
    )
    assert parameters.per_model_batching_parameters(str(tmp_path), common, per_model_configured=True) is None
    (tmp_path / "batching_params.pbtxt").write_text("max_batch_size { value: 128 } allowed_batch_sizes: 128")
    got = parameters.per_model_batching_parameters(str(tmp_path), common, per_model_configured=True)
    assert got == params("max_batch_size { value: 128 } allowed_batch_sizes: 128")


def test_describe_says_every_parameter_in_force():
    queue = parameters.queue_options(
        params("max_batch_size { value: 64 } enable_large_batch_splitting { value: true }"),
        adaptive_batch_timeout=True,
    )
    text = parameters.describe(queue, SchedulerOptions(2, "pool"))
    assert text == (
        "max_batch_size=64 batch_timeout_micros=0 max_enqueued_batches=10 num_batch_threads=2 "
        "thread_pool_name=pool allowed_batch_sizes=[] pad_variable_length_inputs=false "
        "enable_large_batch_splitting=true max_execution_batch_size=64 adaptive_batch_timeout=up to 10000us"
    )
