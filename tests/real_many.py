"""Many ``tpmath.real`` examples in one torchrun launch: ``torchrun … tests/real_many.py CASES.json``.

A launch costs a torch import in torchrun and in every rank (≈ 8 CPU-s for 2 ranks), far more
than the examples themselves, so the tests run each world size's examples in one process
group.  CASES.json is a list of argument lists, each what follows ``-m tpmath.real`` on a
reader's command line.  Every case goes through the command's own steps (``start`` for
``--lang``, ``_plan``, ``launch_env``'s world check, ``run_example``, which prints exactly what
the command prints); rank 0 writes ``MARK i`` before case i, between barriers, so that the
lines of one case are never mixed with another's.  The mismatch example breaks its
communicator and is not run here.
"""

from __future__ import annotations

import json
import os
import sys

from tpmath.cmdline import start
from tpmath.real import __main__ as real
from tpmath.real import common

MARK = "@@ real_many case"


def _prepare(argv: list[str]):
    started = start(argv, quiet=True)
    assert started is not None, argv
    lang, rest = started
    args, p = real._plan(rest, lang)
    assert p["example"] != "mismatch", "a mismatch breaks the group: launch it alone"
    return lang, args, p


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = [_prepare(argv) for argv in json.load(f)]
    torch = common.import_torch()
    rank, world, local = common.launch_env(cases[0][2])
    ctx = common.init(torch, "gloo", rank, world, local, 300.0)
    for i, (lang, args, p) in enumerate(cases):
        common.launch_env(p)                   # every case fits this world size, as its command checks
        ctx.dist.barrier()                     # the previous case's lines are all written
        if rank == 0:
            common.say([f"{MARK} {i}"])
        ctx.dist.barrier()
        real.run_example(args, p, ctx, lang)
    ctx.dist.barrier()
    if rank == 0:
        common.say([f"{MARK} end"])
    ctx.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
