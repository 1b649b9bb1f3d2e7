"""model_server as a process, without loading a model: flags, bad configs, start-up failures."""

from __future__ import annotations

import signal
import subprocess
import time

import grpc

from .conftest import REPO_ROOT, server_command


def run(*flags, timeout=60):
    return subprocess.run(
        [*server_command(), *flags], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_version_flag():
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("TensorFlow ModelServer: ")
    assert "TensorFlow Library: " in result.stdout


def test_bad_flag_value_prints_usage_and_fails():
    result = run("--port=eighty")
    assert result.returncode == 255
    assert "usage:" in result.stdout
    assert "Couldn't interpret value eighty for flag port." in result.stderr


def test_bad_model_config_file(tmp_path):
    config = tmp_path / "bad_model_config.txt"
    config.write_text("improperly formatted file\n")
    result = run(f"--model_config_file={config}", "--port=0", f"--grpc_socket_path={tmp_path / 's'}")
    assert result.returncode == 255
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig" in result.stderr
    assert (
        f"Failed to start server. Error: INVALID_ARGUMENT: Invalid protobuf file: '{config}'" in result.stdout
    )


def test_missing_model_config_file(tmp_path):
    result = run(f"--model_config_file={tmp_path / 'none.config'}")
    assert result.returncode == 255
    assert "Failed to start server. Error: NOT_FOUND:" in result.stdout


def test_config_with_relative_base_path(tmp_path):
    config = tmp_path / "models.config"
    config.write_text(
        'model_config_list { config { name: "m" base_path: "rel" model_platform: "tensorflow" } }'
    )
    result = run(f"--model_config_file={config}")
    assert result.returncode == 255
    assert "Expected model m to have an absolute path or URI; got base_path()=rel" in result.stdout


def test_no_model_flags():
    result = run("--port=1")
    assert result.returncode == 255
    assert (
        "Both server_options.model_base_path and server_options.model_config_file are empty!" in result.stdout
    )


def test_initial_load_failure_exits_with_tf_servings_message(tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)  # a version directory with no SavedModel in it
    result = run(
        f"--model_base_path={tmp_path / 'm'}",
        "--port=0",
        f"--grpc_socket_path={tmp_path / 's'}",
        "--max_num_load_retries=0",
    )
    assert result.returncode == 255, result.stdout + result.stderr
    assert (
        "Failed to start server. Error: UNKNOWN: 1 servable(s) did not become available: "
        "{{{name: default version: 1} due to error: "
    ) in result.stdout


def test_port_stays_closed_until_a_version_appears_and_sigterm_exits(model_server, tmp_path):
    base = tmp_path / "later"
    server = model_server(
        f"--model_base_path={base}", "--file_system_poll_wait_seconds=1", "--no_such_flag=1", wait=False
    )
    deadline = time.monotonic() + 30
    while "Could not find base path" not in server.output():
        assert time.monotonic() < deadline, server.output()
        assert server.proc.poll() is None, server.output()
        time.sleep(0.1)
    assert "unknown argument: --no_such_flag=1" in server.output()
    channel = server.channel()
    try:
        grpc.channel_ready_future(channel).result(timeout=1)
        raise AssertionError("the port opened before any model loaded")
    except grpc.FutureTimeoutError:
        pass
    assert server.stop(signal.SIGTERM) == 0
