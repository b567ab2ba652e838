"""One collective on real ranks: rank r holds the site's buffer 10^r·[1, 2, …, L] and calls
the torch.distributed function of the same name (NCCL's layout: rank-ordered blocks)."""

from __future__ import annotations

import warnings

from .. import ranks
from .common import Ctx, numpy

# torch 2.13 renamed all_gather_into_tensor / reduce_scatter_tensor to all_gather_single /
# reduce_scatter_single and warns on every call.  The examples keep the names Megatron-LM uses,
# which every torch 2.x has (the page shows them); only that notice is silenced.
warnings.filterwarnings("ignore", category=FutureWarning,
                        message=r"`torch\.distributed\.(all_gather_into_tensor|reduce_scatter_tensor)` is deprecated")


def call(ctx: Ctx, name: str, op: str, root: int, x):
    """Run collective ``name`` on this rank's 1-D ``x``; return what this rank receives (or None)."""
    torch, dist = ctx.torch, ctx.dist
    n, r = ctx.world, ctx.rank
    red = getattr(dist.ReduceOp, ranks.TORCH_OPS[op])
    blk = x.numel() // n                                       # block per rank where the data is split
    if name == "all-reduce":
        y = x.clone()
        dist.all_reduce(y, op=red)
        return y
    if name == "reduce":
        y = x.clone()
        dist.reduce(y, dst=root, op=red)
        return y if r == root else None                        # other ranks' buffers are unspecified
    if name == "broadcast":
        y = x.clone()
        dist.broadcast(y, src=root)
        return y
    if name == "all-gather":
        y = torch.empty(n * x.numel(), dtype=x.dtype, device=x.device)    # (n·L,) rank-ordered
        dist.all_gather_into_tensor(y, x)
        return y
    if name == "reduce-scatter":
        y = torch.empty(blk, dtype=x.dtype, device=x.device)              # (L/n,) block r of op(x)
        dist.reduce_scatter_tensor(y, x.clone(), op=red)
        return y
    if name == "all-to-all":
        y = torch.empty_like(x)                                           # block j from rank j
        dist.all_to_all_single(y, x)
        return y
    if name == "gather":
        parts = [torch.empty_like(x) for _ in range(n)] if r == root else None
        dist.gather(x, parts, dst=root)
        return torch.cat(parts) if r == root else None
    if name == "scatter":
        y = torch.empty(blk, dtype=x.dtype, device=x.device)              # block r of root's x
        dist.scatter(y, list(x.chunk(n)) if r == root else None, src=root)
        return y
    raise ValueError(name)


def run(p: dict, ctx: Ctx) -> tuple[list, list | None]:
    """This rank's input and output; rank 0 compares every rank's output with the reference."""
    x = ctx.tensor(p["inputs"][ctx.rank])                               # (L,)
    y = call(ctx, p["name"], p["op"], p["root"], x)
    out = None if y is None else numpy(y)
    records = [("input", numpy(x)),
               (f"output ← {ranks.collective_call(p['name'], p['op'], p['root'])}",
                ranks.NOTHING if out is None else out)]
    outputs = [None] * ctx.world
    ctx.dist.all_gather_object(outputs, out)                              # only to compare, on rank 0
    if ctx.rank != 0:
        return records, None
    ref = ranks.reference_collective(p["name"], p["inputs"], p["op"], p["root"])
    err = ranks.collective_check(outputs, ref)
    return records, [("max|Δ| outputs", ranks.collective_verdict(err, p["name"], p["op"], p["inputs"]))]
