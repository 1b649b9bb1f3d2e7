"""``python -m serving``: the same as the ``model_server`` command."""

import sys

from serving.cli import main

if __name__ == "__main__":
    sys.exit(main())
