"""serving.cli: TF's flag syntax, TF Serving's flag names and defaults, --version, unknown flags."""

import pytest

from serving import cli
from serving.options import ServerOptions


def parse(*argv):
    return cli.parse_flags(list(argv))


def test_defaults_are_tf_servings():
    options, unknown = parse()
    assert unknown == []
    assert options.port == 8500
    assert options.rest_api_port == 0
    assert options.model_name == "default"
    assert options.saved_model_tags == "serve"
    assert options.file_system_poll_wait_seconds == 1
    assert options.model_config_file_poll_wait_seconds == 0
    assert options.max_num_load_retries == 5
    assert options.load_retry_interval_micros == 60_000_000
    assert options.num_load_threads == 0
    assert options.enable_model_warmup is True
    assert options.enable_batching is False
    assert options.rest_api_timeout_in_ms == 30000
    assert options.grpc_bind_address == "0.0.0.0"


def test_thread_defaults_count_the_cpus_the_process_may_use(monkeypatch):
    """TF Serving's 4 x NumSchedulableCPUs: a process limited to 3 CPUs of many gets 12."""
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 5, 7}, raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    options, _ = parse()
    assert options.grpc_max_threads == 12
    assert options.rest_api_num_threads == 12
    assert options.num_tflite_pools == 3


FORMS = {
    "equals": (["--port=9000"], "port", 9000),
    "space": (["--port", "9000"], "port", 9000),
    "string": (["--model_name=half_plus_two"], "model_name", "half_plus_two"),
    "string space": (["--model_base_path", "/m"], "model_base_path", "/m"),
    "empty string": (["--model_name="], "model_name", ""),
    "bool bare": (["--enable_batching"], "enable_batching", True),
    "bool true": (["--enable_batching=true"], "enable_batching", True),
    "bool false": (["--enable_model_warmup=false"], "enable_model_warmup", False),
    "int64": (["--load_retry_interval_micros=100000"], "load_retry_interval_micros", 100000),
    "negative": (["--file_system_poll_wait_seconds=-1"], "file_system_poll_wait_seconds", -1),
    "float": (["--per_process_gpu_memory_fraction=0.5"], "per_process_gpu_memory_fraction", 0.5),
    "channel args": (
        ["--grpc_channel_arguments=grpc.max_connection_age_ms=2000,grpc.lb_policy_name=grpclb"],
        "grpc_channel_arguments",
        "grpc.max_connection_age_ms=2000,grpc.lb_policy_name=grpclb",
    ),
    "prefix is not a match": (
        ["--model_config_file_poll_wait_seconds=5"],
        "model_config_file_poll_wait_seconds",
        5,
    ),
    "value with =": (["--model_base_path=/a=b"], "model_base_path", "/a=b"),
}


@pytest.mark.parametrize("argv, field, value", FORMS.values(), ids=FORMS.keys())
def test_flag_forms(argv, field, value):
    options, unknown = parse(*argv)
    assert unknown == []
    assert getattr(options, field) == value


BAD = {
    "int": ["--port=abc"],
    "int trailing": ["--port=12x"],
    "int32 overflow": ["--port=4294967296"],
    "bool value": ["--enable_batching=yes"],
    "bool suffix": ["--enable_batchingX"],
    "float": ["--per_process_gpu_memory_fraction=half"],
    "help": ["--help"],
}


@pytest.mark.parametrize("argv", BAD.values(), ids=BAD.keys())
def test_bad_values_fail(argv):
    with pytest.raises(cli.FlagParseError):
        parse(*argv)


def test_unknown_flags_are_left_over():
    options, unknown = parse("--port=1", "--no_such_flag=3", "positional", "-port=5")
    assert options.port == 1
    assert unknown == ["--no_such_flag=3", "positional", "-port=5"]


def test_every_flag_is_an_option_field():
    fields = set(ServerOptions.__dataclass_fields__)
    assert {f.name for f in cli.FLAGS} <= fields


def test_every_flag_is_claimed_by_itself():
    """TF's parser gives an argument to the first flag whose name prefixes it: a new flag must
    not be swallowed by an earlier one (``--version`` would take ``--version_x``)."""
    for flag in cli.FLAGS:
        value = {cli.BOOL: "true", cli.STRING: "x", cli.FLOAT: "1.5"}.get(flag.type, "7")
        options, unknown = cli.parse_flags([f"--{flag.name}={value}"])
        assert unknown == [], flag.name
        assert getattr(options, flag.name) != getattr(ServerOptions(), flag.name) or flag.type == cli.BOOL, (
            flag.name
        )


def test_main_version(capsys):
    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("TensorFlow ModelServer: ")
    assert "TensorFlow Library: " in out


def test_main_bad_flag_exits_255(capsys):
    assert cli.main(["--port=abc"]) == 255
    assert "usage:" in capsys.readouterr().out


def test_main_missing_model_fails_like_tf_serving(capsys):
    assert cli.main(["--port=0"]) == 255
    out = capsys.readouterr().out
    assert "Failed to start server. Error: INVALID_ARGUMENT: At least one of server_options.grpc_port" in out


def test_main_no_model_base_path(capsys):
    assert cli.main(["--port=1"]) == 255
    assert (
        "Failed to start server. Error: INVALID_ARGUMENT: Both server_options.model_base_path and "
        "server_options.model_config_file are empty!"
    ) in capsys.readouterr().out


def test_batching_file_needs_enable_batching(capsys):
    assert cli.main(["--model_base_path=/x", "--batching_parameters_file=/b"]) == 255
    assert "batching_parameters_file is set without setting" in capsys.readouterr().out


def test_usage_lists_flags_with_defaults():
    text = cli.usage("model_server")
    assert "--port=8500" in text
    assert '--model_name="default"' in text
    assert "--enable_batching=false" in text
