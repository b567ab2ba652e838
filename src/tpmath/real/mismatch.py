"""A mismatched collective on real ranks, with a timeout: what the backend really does.

Every rank first prints the checker's verdict for each of its calls (:mod:`tpmath.mismatch`),
then makes the calls with torch.distributed and prints what happened: completed (and whether
the data is what a matched call gives), timed out, or failed.  NCCL documents a mismatch as
undefined: hangs, crashes or silent corruption; gloo shows all three (a rank can also be
killed by the backend, and then torchrun reports its signal).  Every collective has the
process group's timeout, so nothing waits forever.

Rank r's buffer is filled with r + 1, so a matched call's result is known exactly.
"""

from __future__ import annotations

import numpy as np

from .. import ranks
from ..i18n import Text
from ..ranks.output import name_width
from .common import Ctx, numpy, say


def _groups(ctx: Ctx, calls: list[list[dict]], timeout) -> dict:
    """A process group per distinct member set, created on every rank in the same order
    (new_group is itself collective over the world)."""
    everyone = tuple(range(ctx.world))
    wanted = sorted({c["group"] for seq in calls for c in seq} - {everyone})
    groups = {everyone: ctx.dist.group.WORLD}
    for g in wanted:
        groups[g] = ctx.dist.new_group(list(g), timeout=timeout)
    return groups


def _matched_result(call: dict) -> np.ndarray | None:
    """What this rank holds after ``call`` if every member had made the same call."""
    members = call["group"]
    if call["name"] == "all-reduce":
        return np.full(call["shape"], float(sum(m + 1 for m in members)))
    if call["name"] == "all-gather":
        return np.concatenate([np.full(call["shape"], float(m + 1)).ravel() for m in members])
    if call["name"] == "broadcast":
        return np.full(call["shape"], float(members[0] + 1))
    return None                                                    # barrier: no data


def _call(ctx: Ctx, call: dict, group):
    """Make one call on this rank's buffer (filled with rank + 1); return the result buffer."""
    torch, dist = ctx.torch, ctx.dist
    dtype = getattr(torch, call["dtype"])
    x = torch.full(tuple(call["shape"]), ctx.rank + 1, dtype=dtype, device=ctx.device)
    if call["name"] == "all-reduce":
        dist.all_reduce(x, group=group)
        return x
    if call["name"] == "all-gather":
        out = torch.empty(len(call["group"]) * x.numel(), dtype=dtype, device=ctx.device)
        dist.all_gather_into_tensor(out, x.reshape(-1), group=group)
        return out
    if call["name"] == "broadcast":
        dist.broadcast(x, src=call["group"][0], group=group)
        return x
    dist.barrier(group=group)
    return None


def _failure(exc: BaseException, timeout_s: float) -> Text:
    """One line for a backend error; gloo prefixes its source location, dropped here."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    text = text.split(". ", 1)[0].rstrip(".")      # the first sentence says what happened
    if "timed out" in text.lower() or "timeout" in text.lower():
        return Text("real.timed_out", bad=ranks.BAD, seconds=f"{timeout_s:g}", detail=text[:120])
    return Text("real.failed", bad=ranks.BAD, detail=text[:160])


def run(p: dict, ctx: Ctx, lang: str = "en") -> None:
    """Print the checker's verdict, then each real call's outcome as it happens."""
    import datetime
    per_rank, _ = ranks.expected(p)
    mine = p["calls"][ctx.rank]
    width = name_width(per_rank[ctx.rank], lang)
    say(ranks.format_rank(ctx.rank, per_rank[ctx.rank], lang=lang))
    groups = _groups(ctx, p["calls"], datetime.timedelta(seconds=p["timeout"]))
    for i, call in enumerate(mine):
        name = f"#{i} {ranks.call_text(call)}"
        try:
            out = _call(ctx, call, groups[call["group"]])
        except Exception as exc:   # noqa: BLE001 - whatever the backend raises is the outcome
            say(ranks.format_rank(ctx.rank, [(name, Text("real.real_outcome", outcome=_failure(exc, p["timeout"])))],
                                  width, lang))
            return                 # the communicator is now unusable: this rank stops here
        want = _matched_result(call)
        if want is None or (out.shape == tuple(want.shape) and np.array_equal(numpy(out), want)):
            outcome = Text("real.completed", ok=ranks.OK)
        else:
            outcome = Text("real.wrong_data", bad=ranks.BAD, got=ranks.value_text(numpy(out)))
        say(ranks.format_rank(ctx.rank, [(name, Text("real.real_outcome", outcome=outcome))], width, lang))
