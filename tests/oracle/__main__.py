"""``python -m tests.oracle {build,list,models}``; see ``tests/oracle/__init__.py``."""

from __future__ import annotations

import argparse
import os
import sys

from tests.oracle import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.oracle", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="build stale models of the corpus")
    build_parser.add_argument("--force", action="store_true", help="rebuild even if current")
    build_parser.add_argument("--only", action="append", metavar="NAME", help="repeatable")
    build_parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="builder subprocesses at once (default: %(default)s)",
    )
    commands.add_parser("list", help="list the corpus and what is current")
    models_parser = commands.add_parser("models", help="rebuild the committed models/ exports")
    models_parser.add_argument("--only", action="append", metavar="NAME", help="repeatable")
    args = parser.parse_args(argv)
    if args.command == "build":
        return build.build(force=args.force, only=args.only, jobs=args.jobs)
    if args.command == "list":
        return build.list_models()
    return build.build_models(args.only)


if __name__ == "__main__":
    sys.exit(main())
