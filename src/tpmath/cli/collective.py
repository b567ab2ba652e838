"""``python -m tpmath collective NAME --inputs M [--op OP] [--root R]``.

M is a JSON matrix whose row r is rank r's buffer (or a 3-D array: one matrix
per rank).  Prints ``name``, ``op``, ``root``, ``inputs`` and ``outputs`` (one
entry per rank, ``null`` where a rank receives nothing).
"""

from __future__ import annotations

from ..collectives import NAMES, OPS, run_collective
from ..validate import as_array, as_choice

NAME = "collective"
HELP = "run one collective (NCCL layouts) on per-rank buffers: " + ", ".join(NAMES)


def add_arguments(parser) -> None:
    parser.add_argument("name", metavar="NAME", help="one of: " + " ".join(NAMES))
    parser.add_argument("--inputs", required=True, metavar="M",
                        help="JSON matrix, row r = rank r's buffer, e.g. [[1,2,3,4],[10,20,30,40]]")
    parser.add_argument("--op", default="sum", help="reduction: " + " ".join(OPS) + " (default sum)")
    parser.add_argument("--root", default="0", help="root rank for reduce/broadcast/gather/scatter (default 0)")


def run(args) -> dict:
    as_choice("name", args.name, NAMES)  # an unknown collective is reported before the inputs
    inputs = as_array("inputs", args.inputs, ndim=(2, 3))  # (n, count) or (n, rows, cols)
    return run_collective(args.name, list(inputs), op=args.op, root=args.root)
