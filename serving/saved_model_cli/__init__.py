"""``saved_model_cli`` without TensorFlow: TF's ``show``, ``run`` and ``scan``, and more.

TensorFlow's ``saved_model_cli`` (tensorflow/python/tools/saved_model_cli.py) is the spec for the
commands, flags and output it shares with ours: ``show`` (``main.py`` parses, ``show.py`` and
``concrete_functions.py`` print), ``run`` (``inputs.py`` reads ``--inputs``/``--input_exprs``/
``--input_examples``, the latter two through ``safe_eval.py``, never ``eval``; ``run.py`` runs
the signature on our loader and runtime). Beyond TF: ``scan`` says per signature what the runtime
cannot run and what runs in onnxruntime (``scan.py``), ``show --graph KEY --output FILE`` draws
where each op runs (``graph_picture.py``), ``run --benchmark N`` times N runs.

Every failure is one line on stderr and a non-zero exit status, never a traceback. The package
imports neither grpc nor any server module: it is a tool over ``loader`` and ``runtime``.
"""

from serving.saved_model_cli.main import main

__all__ = ["main"]
