"""The ``saved_model_cli`` command line: TF's commands and flags, parsed as absl parses them.

Every flag is accepted after any command, as TF's absl flags are (``--dir=DIR`` or ``--dir DIR``;
booleans as ``--all``, ``--noall`` or ``--all=false``). Each command requires TF's flags
(``show``: ``--dir``; ``run``: ``--dir``, ``--tag_set``, ``--signature_def``; ``scan``: ``--dir``).
Ours beside TF's: ``--allow_pickle``, ``--benchmark``, ``--onnx_delegation``, ``--graph``,
``--output``. TF's commands that need TensorFlow itself (``convert``, ``freeze_model``,
``aot_compile_cpu``) and flags that need its runtime (``--tf_debug``, ``--worker``,
``--init_tpu``, ``--use_tfrt``) are refused with a one-line reason.

This is the only module of the package that reads the command line.
"""

from __future__ import annotations

import argparse
import logging
import sys

from runtime import errors
from serving.saved_model_cli.errors import CliError

VERSION = "0.1.0"  # what TF's saved_model_cli prints for --version
_REQUIRED = {"show": ("dir",), "run": ("dir", "tag_set", "signature_def"), "scan": ("dir",)}
_NEEDS_TENSORFLOW = ("convert", "freeze_model", "aot_compile_cpu")
_REFUSED_FLAGS = {
    "tf_debug": "--tf_debug needs TensorFlow's debugger (tfdbg), which runs only in TensorFlow's "
    "own session: run the SavedModel without it, or with TensorFlow's saved_model_cli",
    "worker": "--worker runs the session on a remote TensorFlow worker: only the local runtime runs here",
    "init_tpu": "--init_tpu initializes a TPU system: only the local CPU runtime runs here",
    "use_tfrt": "--use_tfrt selects TensorFlow's TFRT session: only this package's runtime runs here",
}


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line (the usage is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(2, f"saved_model_cli: error: {message} (see {self.prog} --help)\n")


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "t", "1"):
        return True
    if lowered in ("false", "f", "0"):
        return False
    raise argparse.ArgumentTypeError(f"Non-boolean argument to boolean flag: {text}")


def _add_flags(parser: argparse.ArgumentParser) -> None:
    strings = {
        "dir": "Directory containing the SavedModel.",
        "tag_set": "Comma-separated set of tags that identify variant graphs in the SavedModel.",
        "signature_def": "A SignatureDef (by key) within the SavedModel.",
        "inputs": "'<input_key>=<filename>' or '<input_key>=<filename>[<variable_name>]', separated "
        "by ';'. Files are .npy or .npz (pickled ones only with --allow_pickle).",
        "input_exprs": "'<input_key>=<expression>', separated by ';': Python literals and numpy "
        "constructors such as np.ones((2, 3)), evaluated safely (never eval).",
        "input_examples": "'<input_key>=[{feature0:value_list,feature1:value_list}]', separated by ';'.",
        "outdir": "If specified, writes each output to <outdir>/<output_key>.npy.",
        "op_denylist": "Comma-separated ops that scan reports (default: WriteFile, ReadFile, PrintV2).",
        "worker": "(TF only) a remote worker.",
        "graph": "(ours) show: draw the SignatureDef of this key; needs --output.",
        "output": "(ours) show --graph: the picture's file: .svg, .png, .pdf, or .dot/.gv for its "
        "DOT source (only these need no Graphviz 'dot' program).",
    }
    for name, text in strings.items():
        parser.add_argument(f"--{name}", default=None if name != "inputs" else "", help=text)
    for name in ("input_exprs", "input_examples"):
        parser.set_defaults(**{name: ""})
    booleans = {
        "all": "show: everything in the SavedModel.",
        "list_ops": "show: the ops of the MetaGraphDef of --tag_set.",
        "overwrite": "run: overwrite existing files in --outdir.",
        "tf_debug": "(TF only) TensorFlow's debugger.",
        "init_tpu": "(TF only) initialize a TPU system.",
        "use_tfrt": "(TF only) a TFRT session.",
        "allow_pickle": "(ours) run: let --inputs load pickled .npy/.npz files (unpickling runs code).",
        "onnx_delegation": "(ours) run and scan: run op clusters in onnxruntime, as model_server does "
        "(default true).",
    }
    for name, text in booleans.items():
        default = name == "onnx_delegation"
        parser.add_argument(
            f"--{name}", nargs="?", const=True, default=default, type=_parse_bool, metavar="BOOL", help=text
        )
        parser.add_argument(f"--no{name}", dest=name, action="store_false", help=argparse.SUPPRESS)
    parser.add_argument(
        "--benchmark", type=int, default=0, metavar="N", help="(ours) run: time N runs, print percentiles."
    )


def create_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="saved_model_cli", description="saved_model_cli: Command-line interface for SavedModel"
    )
    parser.add_argument("-v", "--version", action="version", version=VERSION)
    commands = parser.add_subparsers(dest="command", title="commands", description="valid commands")
    for name, text in (
        ("show", "Show the tag-sets, SignatureDefs, ops and functions of a SavedModel."),
        ("run", "Run a SignatureDef on inputs from files, expressions or tf.Example features."),
        ("scan", "Check that every SignatureDef can run here, and say what runs in onnxruntime."),
    ):
        _add_flags(commands.add_parser(name, help=text, description=text))
    for name in _NEEDS_TENSORFLOW:
        commands.add_parser(name, help="(needs TensorFlow)", add_help=False)
    return parser


def _dispatch(args) -> int:
    if args.command in _NEEDS_TENSORFLOW:
        raise CliError(
            f"'{args.command}' rewrites or compiles the model with TensorFlow itself: "
            "use TensorFlow's saved_model_cli for it"
        )
    for flag in _REQUIRED[args.command]:
        if getattr(args, flag) is None:
            raise CliError(f"flag --{flag}=None: Flag --{flag} must have a value other than None.")
    for flag, why in _REFUSED_FLAGS.items():
        if getattr(args, flag):
            raise CliError(why)
    if args.command == "show":
        from serving.saved_model_cli.show import show

        return show(args)
    if args.command == "run":
        from serving.saved_model_cli.run import run

        return run(args)
    from serving.saved_model_cli.scan import scan

    return scan(args)


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns the exit status (1 with a one-line error on failure)."""
    parser = create_parser()
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in _NEEDS_TENSORFLOW:  # refused whatever flags follow
        args = argparse.Namespace(command=argv[0])
    else:
        args = parser.parse_args(argv)
    if args.command is None:
        parser.error("Too few arguments.")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        return _dispatch(args)
    except CliError as e:
        message = str(e)
    except errors.OpError as e:
        message = f"{type(e).__name__}: {e.message}"
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - a CLI answers every failure in one line
        message = f"{type(e).__name__}: {e}"
    print(f"saved_model_cli: error: {' '.join(message.split())}", file=sys.stderr)
    return 1
