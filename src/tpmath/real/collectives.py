"""One collective on real ranks: rank r holds the site's buffer 10^r·[1, 2, …, L] and calls
the torch.distributed function of the same name (NCCL's layout: rank-ordered blocks)."""

from __future__ import annotations

import warnings

from .. import ranks
from ..collectives import REGISTRY
from ..i18n import Text
from .common import Ctx, numpy

# torch 2.13 renamed all_gather_into_tensor / reduce_scatter_tensor to all_gather_single /
# reduce_scatter_single and warns on every call.  The examples keep the names Megatron-LM uses,
# which every torch 2.x has (the page shows them); only that notice is silenced.
warnings.filterwarnings("ignore", category=FutureWarning,
                        message=r"`torch\.distributed\.(all_gather_into_tensor|reduce_scatter_tensor)` is deprecated")


def call(ctx: Ctx, name: str, op: str, root: int, x):
    """Run collective ``name`` on this rank's 1-D ``x``; return what this rank receives (or None).
    The torch code of each collective is part of its record (:data:`tpmath.collectives.REGISTRY`)."""
    spec = REGISTRY[name]
    red = getattr(ctx.dist.ReduceOp, ranks.TORCH_OPS[op]) if spec.reduces else None
    return spec.run_torch(ctx, x, red, root)


def run(p: dict, ctx: Ctx) -> tuple[list, list | None]:
    """This rank's input and output; rank 0 compares every rank's output with the reference."""
    x = ctx.tensor(p["inputs"][ctx.rank])                               # (L,)
    y = call(ctx, p["name"], p["op"], p["root"], x)
    out = None if y is None else numpy(y)
    records = [(Text("real.input"), numpy(x)),
               (Text("real.output", call=ranks.collective_call(p['name'], p['op'], p['root'])),
                ranks.NOTHING if out is None else out)]
    outputs = [None] * ctx.world
    ctx.dist.all_gather_object(outputs, out)                              # only to compare, on rank 0
    if ctx.rank != 0:
        return records, None
    ref = ranks.reference_collective(p["name"], p["inputs"], p["op"], p["root"])
    err = ranks.collective_check(outputs, ref)
    return records, [(Text("real.max_diff_outputs"), ranks.collective_verdict(err, p["name"], p["op"], p["inputs"]))]
