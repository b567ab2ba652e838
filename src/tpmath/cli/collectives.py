"""``python -m tpmath collective NAME --inputs M [--op OP] [--root R]``.

M is a JSON matrix whose row r is rank r's buffer (or a 3-D array: one matrix
per rank).  Prints ``name``, ``op``, ``root``, ``inputs`` and ``outputs`` (one
entry per rank, ``null`` where a rank receives nothing).
"""

from __future__ import annotations

from ..collectives import NAMES, OPS, ROOTED, run_collective
from ..validate import as_array, as_choice

NAME = "collective"
# what the help strings (content/i18n/<lang>.cli.toml) quote, per option
HELP_ARGS = {"about": {"names": NAMES}, "name": {"choices": NAMES}, "op": {"choices": OPS},
             "root": {"rooted": "/".join(ROOTED)}}


def add_arguments(parser) -> None:
    parser.add_argument("name", metavar="NAME")
    parser.add_argument("--inputs", required=True, metavar="M")
    parser.add_argument("--op", default="sum")
    parser.add_argument("--root", default="0")


def run(args) -> dict:
    as_choice("name", args.name, NAMES)  # an unknown collective is reported before the inputs
    inputs = as_array("inputs", args.inputs, ndim=(2, 3))  # (n, count) or (n, rows, cols)
    return run_collective(args.name, list(inputs), op=args.op, root=args.root)
