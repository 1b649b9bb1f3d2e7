"""``python -m serving.saved_model_cli``: the same as the ``saved_model_cli`` command."""

import sys

from serving.saved_model_cli.main import main

if __name__ == "__main__":
    sys.exit(main())
