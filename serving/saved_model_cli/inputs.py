"""``run``'s inputs: ``--inputs`` files, ``--input_exprs`` expressions, ``--input_examples`` features.

The formats are TF's ``saved_model_cli``'s (entries separated by ``;``; a later flag overrides an
earlier one for the same key: ``--inputs`` < ``--input_exprs`` < ``--input_examples``), with two
differences that keep untrusted text and files from running code:

- ``--inputs`` loads ``.npy``/``.npz`` with ``allow_pickle`` off unless ``--allow_pickle`` is
  given (TF always allows it; unpickling a file runs whatever code it names);
- ``--input_exprs`` and ``--input_examples`` go through ``safe_eval`` (literals and numpy
  constructors), where TF uses ``ast.literal_eval``, which refuses numpy calls.
"""

from __future__ import annotations

import logging
import re
import zipfile

import numpy as np

from apis.tensorflow.core.example import example_pb2
from serving.saved_model_cli import safe_eval
from serving.saved_model_cli.errors import CliError

logger = logging.getLogger(__name__)

_WITH_VARIABLE = re.compile(r"([^=]+)=([^\[\]]+)\[([^\[\]]+)\]$")
_FILE_ONLY = re.compile(r"([^=]+)=([^\[\]]+)$")
_PICKLE_HINT = "pass --allow_pickle to load it, if you trust the file: unpickling runs code it names"


def parse_inputs(text: str) -> dict[str, tuple[str, str | None]]:
    """``key=file`` / ``key=file[variable]`` entries -> {key: (file, variable or None)}."""
    found = {}
    for entry in filter(None, text.split(";")):
        match = _WITH_VARIABLE.match(entry) or _FILE_ONLY.match(entry)
        if match is None:
            raise CliError(
                f'--inputs "{entry}" format is incorrect. Please follow"<input_key>=<filename>", '
                'or"<input_key>=<filename>[<variable_name>]"'
            )
        found[match.group(1)] = (match.group(2), match.group(3) if match.lastindex == 3 else None)
    return found


def parse_expressions(text: str, flag: str = "--input_exprs") -> dict[str, object]:
    """``key=expression`` entries -> {key: value}, each expression through ``safe_eval``."""
    found = {}
    for entry in filter(None, text.split(";")):
        if "=" not in entry:
            raise CliError(
                f'{flag} "{entry}" format is incorrect. Please follow"<input_key>=<python expression>"'
            )
        key, expression = entry.split("=", 1)
        try:
            found[key] = safe_eval.evaluate(expression)
        except (ValueError, TypeError, ArithmeticError) as e:  # numpy's own refusals included
            raise CliError(f'{flag}: expression "{expression}" for input {key!r} is refused: {e}') from None
    return found


def parse_examples(text: str) -> dict[str, list[bytes]]:
    """``key=[{feature: [values]}, ...]`` entries -> {key: serialized tf.Examples}."""
    found = {}
    for key, examples in parse_expressions(text, "--input_examples").items():
        if not isinstance(examples, list):
            raise CliError(
                f'tf.Example input must be a list of dictionaries, but "{examples}" is {type(examples)}'
            )
        found[key] = [_example(e) for e in examples]
    return found


def _example(features) -> bytes:
    """One serialized tf.Example; each feature's kind from its first value, as TF decides it."""
    if not isinstance(features, dict):
        raise CliError(
            f"tf.Example input must be a list of dictionaries, but {features!r} is {type(features)}"
        )
    example = example_pb2.Example()
    for name, values in features.items():
        if not isinstance(values, list) or not values:
            raise CliError(
                f'feature value must be a non-empty list, but {name}: "{values}" is {type(values)}'
            )
        feature = example.features.feature[name]
        first = values[0]
        try:
            if isinstance(first, float):
                feature.float_list.value.extend(values)
            elif isinstance(first, str):
                feature.bytes_list.value.extend(v.encode("utf8") for v in values)
            elif isinstance(first, bytes):
                feature.bytes_list.value.extend(values)
            elif isinstance(first, int):
                feature.int64_list.value.extend(values)
            else:
                raise CliError(f"Type {type(first)} for value {first} is not supported for tf.train.Feature.")
        except (TypeError, ValueError, AttributeError) as e:
            raise CliError(f"feature {name!r}: values {values!r} are not all of one kind: {e}") from None
    return example.SerializeToString()


def load_file(filename: str, variable: str | None, allow_pickle: bool) -> np.ndarray:
    """One ``--inputs`` entry's array, with TF's rules for ``.npz`` variables."""
    try:
        data = np.load(filename, allow_pickle=allow_pickle)
    except FileNotFoundError:
        raise CliError(f"--inputs: no such file: {filename}") from None
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise CliError(f"--inputs: {filename} holds pickled data: {_PICKLE_HINT}") from None
        raise CliError(f"--inputs: cannot load {filename}: {e}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise CliError(f"--inputs: cannot load {filename} as .npy or .npz: {e}") from None
    if isinstance(data, np.ndarray):
        if variable:
            logger.warning(
                'Input file %s contains a single ndarray. Name key "%s" ignored.', filename, variable
            )
        return data
    with data:
        if not variable:
            if len(data.files) != 1:
                raise CliError(
                    f"Input file {filename} contains more than one ndarrays. "
                    "Please specify the name of ndarray to use."
                )
            variable = data.files[0]
        if variable not in data.files:
            raise CliError(f'Input file {filename} does not contain variable with name "{variable}".')
        try:
            return data[variable]
        except ValueError as e:
            if "allow_pickle" in str(e):
                raise CliError(
                    f"--inputs: {filename}[{variable}] holds pickled data: {_PICKLE_HINT}"
                ) from None
            raise


def feeds(args) -> dict[str, object]:
    """Input key -> value from the three flags, later flags overriding earlier ones (TF's order)."""
    if not (args.inputs or args.input_exprs or args.input_examples):
        raise CliError("At least one of --inputs, --input_exprs or --input_examples must be required")
    files = parse_inputs(args.inputs or "")
    expressions = parse_expressions(args.input_exprs or "")
    examples = parse_examples(args.input_examples or "")
    values: dict[str, object] = {
        key: load_file(name, variable, args.allow_pickle) for key, (name, variable) in files.items()
    }
    for key, value in expressions.items():
        if key in values:
            logger.warning(
                "input_key %s has been specified with both --inputs and --input_exprs options. "
                "Value in --input_exprs will be used.",
                key,
            )
        values[key] = value
    for key, value in examples.items():
        if key in values:
            logger.warning(
                "input_key %s has been specified in multiple options. "
                "Value in --input_examples will be used.",
                key,
            )
        values[key] = value
    return values
