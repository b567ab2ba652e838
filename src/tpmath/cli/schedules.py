"""``python -m tpmath ring --ranks N --count C [--elem-bytes K] [--algorithm ring|tree]``.

Prints the AllReduce schedule (steps: who sends which chunk to whom) and the
messages and bytes each rank sends and receives, plus nccl-tests' bus factor.
"""

from __future__ import annotations

from ..schedules import ALGORITHMS, all_reduce_schedule

NAME = "ring"
# what the help strings (content/i18n/<lang>.cli.toml) quote, per option
HELP_ARGS = {"algorithm": {"choices": ALGORITHMS}}


def add_arguments(parser) -> None:
    parser.add_argument("--ranks", required=True, metavar="N")
    parser.add_argument("--count", required=True, metavar="C")
    parser.add_argument("--elem-bytes", default="4", metavar="K")
    parser.add_argument("--algorithm", default="ring")


def run(args) -> dict:
    return all_reduce_schedule(args.ranks, args.count, args.elem_bytes, args.algorithm)
