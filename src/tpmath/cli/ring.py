"""``python -m tpmath ring --ranks N --count C [--elem-bytes K] [--algorithm ring|tree]``.

Prints the AllReduce schedule (steps: who sends which chunk to whom) and the
messages and bytes each rank sends and receives, plus nccl-tests' bus factor.
"""

from __future__ import annotations

from ..schedules import ALGORITHMS, all_reduce_schedule

NAME = "ring"
HELP = "AllReduce schedule (ring or binary tree): steps, per-rank messages and bytes, bus factor"


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", required=True, metavar="N", help="number of ranks n")
    parser.add_argument("--count", required=True, metavar="C", help="elements per rank")
    parser.add_argument("--elem-bytes", default="4", metavar="K", help="bytes per element (default 4)")
    parser.add_argument("--algorithm", default="ring", help="one of: " + " ".join(ALGORITHMS))


def run(args) -> dict:
    return all_reduce_schedule(args.ranks, args.count, args.elem_bytes, args.algorithm)
