"""TensorFlow's own ``saved_model_cli``, run in an oracle venv for the tests to compare with.

``<oracle python> tf_saved_model_cli.py < commands.jsonl``: each input line is a JSON list of
arguments (``["show", "--dir", ..., "--all"]``); each output line is a JSON object with the
arguments, what TF's command printed to stdout, and the exception it raised (``"Type: message"``,
or null). One TensorFlow import serves every command: absl's flags are reset before each one,
then TF's own parser (``create_parser``) and command function run exactly as its ``main`` runs
them. Runs without this repository on ``sys.path``: only TensorFlow's modules are imported.
"""

import contextlib
import io
import json
import sys

from absl import flags
from tensorflow.python.tools import saved_model_cli


def run_one(argv: list) -> dict:
    flags.FLAGS.unparse_flags()
    stdout = io.StringIO()
    error = None
    with contextlib.redirect_stdout(stdout):
        try:
            parser = saved_model_cli.create_parser()
            flags.mark_flags_as_required(saved_model_cli.command_required_flags[argv[0]])
            parser.parse_args(argv).func()
        except BaseException as e:  # noqa: BLE001 - the test compares TF's failure with ours
            error = f"{type(e).__name__}: {e}"
    return {"argv": argv, "stdout": stdout.getvalue(), "error": error}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(run_one(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
