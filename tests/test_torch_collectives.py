"""Cross-check ``tpmath.collectives`` against real ``torch.distributed`` (gloo) on 2 and 4 local processes.

Each world size is one ``torch.multiprocessing.spawn`` of n processes on
127.0.0.1 (tcp:// rendezvous on a free port, 30 s process-group timeout, and a
hard deadline after which the test kills the processes it started), so a hang
fails the test instead of blocking CI.  Every process runs every collective on
its own float64 buffer and saves what it received; the parent compares that
with ``collective(...)`` on the same buffers.

What gloo supports in torch 2.13.0 (probed, recorded per call in the results):
all_reduce with SUM / AVG / MAX / MIN / PRODUCT, reduce, broadcast,
all_gather_into_tensor (and the list ``all_gather``), reduce_scatter_tensor and
the list ``reduce_scatter``, all_to_all_single,
all_to_all, gather, scatter.  Older torch versions lacked AVG and reduce_scatter
on gloo: a call gloo refuses is reported as a skip naming the error, never as a pass.
"""

from __future__ import annotations

import datetime
import os
import socket
import tempfile
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from tpmath.collectives import collective  # noqa: E402
from tpmath.real import collectives as real_collective  # noqa: E402
from tpmath.real.common import Ctx  # noqa: E402

pytestmark = pytest.mark.torch

WORLD_SIZES = (2, 4)
DEADLINE_S = 50.0  # per world size; whole file stays well under a minute
OPS = {"sum": "SUM", "avg": "AVG", "max": "MAX", "min": "MIN", "prod": "PRODUCT"}


def rank_input(rank: int, n: int) -> np.ndarray:
    """Rank ``rank``'s buffer: 3n float64 values in [0.5, 1.5) (3n so n divides it)."""
    return np.random.default_rng(1000 * n + rank).uniform(0.5, 1.5, 3 * n)


def _cases(n: int) -> list[tuple[str, str, int]]:
    """(collective, op, root) cases run in every process, in the same order on every rank."""
    root = n - 1
    cases = [("all-reduce", op, 0) for op in OPS]
    cases += [("reduce", op, root) for op in ("sum", "max", "prod")]
    cases += [("reduce-scatter", op, 0) for op in ("sum", "max", "min")]
    cases += [("broadcast", "sum", 1), ("all-gather", "sum", 0), ("all-to-all", "sum", 0),
              ("gather", "sum", root), ("scatter", "sum", root)]
    return cases


def _variants(name: str) -> list[str]:
    """The torch.distributed calls exercised for one collective (tensor and list APIs)."""
    return {
        "all-reduce": ["all_reduce"], "reduce": ["reduce"], "broadcast": ["broadcast"],
        "all-gather": ["all_gather_into_tensor", "all_gather"],
        "reduce-scatter": ["reduce_scatter_tensor", "reduce_scatter"],
        "all-to-all": ["all_to_all_single", "all_to_all"],
        "gather": ["gather"], "scatter": ["scatter"],
    }[name]


# The tensor APIs are called through tpmath.real.collectives.call (what `python -m tpmath.real
# collective` runs), so this cross-check also covers the real-ranks example; the list APIs here.
TENSOR_API = {"all_reduce": "all-reduce", "reduce": "reduce", "broadcast": "broadcast",
              "all_gather_into_tensor": "all-gather", "reduce_scatter_tensor": "reduce-scatter",
              "all_to_all_single": "all-to-all", "gather": "gather", "scatter": "scatter"}


def _run_one(api: str, name: str, op: str, root: int, ctx, x: "torch.Tensor"):
    """Call one torch.distributed API; return this rank's output tensor or None."""
    if api in TENSOR_API:
        return real_collective.call(ctx, TENSOR_API[api], op, root, x)
    red = getattr(dist.ReduceOp, OPS[op])
    n = ctx.world
    blk = x.numel() // n
    if api == "all_gather":
        parts = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(parts, x)
        return torch.cat(parts)
    if api == "reduce_scatter":
        y = torch.empty(blk, dtype=x.dtype)
        dist.reduce_scatter(y, list(x.clone().chunk(n)), op=red)
        return y
    if api == "all_to_all":
        parts = [torch.empty(blk, dtype=x.dtype) for _ in range(n)]
        dist.all_to_all(parts, list(x.chunk(n)))
        return torch.cat(parts)
    raise ValueError(api)


def _worker(rank: int, n: int, port: int, outdir: str) -> None:
    """One process of the group: run every case, save {key: output list | None | error}."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=30))
    x = torch.from_numpy(rank_input(rank, n))
    ctx = Ctx(torch, dist, rank, n, torch.device("cpu"), "gloo")
    results = {}
    try:
        for name, op, root in _cases(n):
            for api in _variants(name):
                key = f"{name}|{op}|{root}|{api}"
                try:
                    y = _run_one(api, name, op, root, ctx, x)
                    results[key] = {"ok": True, "out": None if y is None else y.tolist()}
                except (RuntimeError, ValueError, NotImplementedError) as exc:
                    # gloo refused the call on every rank alike (checked before any data moves)
                    results[key] = {"ok": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        dist.barrier()
    finally:
        torch.save(results, os.path.join(outdir, f"rank{rank}.pt"))
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_world(n: int) -> list[dict]:
    """Spawn n gloo processes, wait at most DEADLINE_S, return each rank's results."""
    with tempfile.TemporaryDirectory() as outdir:
        ctx = mp.spawn(_worker, args=(n, _free_port(), outdir), nprocs=n, join=False)
        deadline = time.monotonic() + DEADLINE_S
        try:
            while not ctx.join(timeout=1.0):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"torch.distributed gloo with {n} processes did not finish in {DEADLINE_S} s")
        finally:
            for p in ctx.processes:  # only the processes this test spawned
                if p.is_alive():
                    p.terminate()
        return [torch.load(os.path.join(outdir, f"rank{r}.pt")) for r in range(n)]


_CACHE: dict[int, list[dict]] = {}


def world(n: int) -> list[dict]:
    if n not in _CACHE:
        _CACHE[n] = _run_world(n)
    return _CACHE[n]


def _all_keys():
    for n in WORLD_SIZES:
        for name, op, root in _cases(n):
            for api in _variants(name):
                yield pytest.param(n, name, op, root, api, id=f"n{n}-{name}-{op}-root{root}-{api}")


@pytest.mark.parametrize("n, name, op, root, api", list(_all_keys()))
def test_matches_torch_distributed_gloo(n, name, op, root, api):
    results = world(n)
    key = f"{name}|{op}|{root}|{api}"
    entries = [results[r][key] for r in range(n)]
    if not entries[0]["ok"]:
        pytest.skip(f"gloo in torch {torch.__version__} does not support {api} op={op}: {entries[0]['error']}")
    assert all(e["ok"] for e in entries), entries
    inputs = [rank_input(r, n) for r in range(n)]
    ours = collective(name, inputs, op=op, root=root)
    for r in range(n):
        theirs = entries[r]["out"]
        if ours[r] is None:
            assert theirs is None, f"rank {r} should receive nothing"
            continue
        # float64; gloo's reduction order may differ from our rank order: a few ulps
        np.testing.assert_allclose(np.asarray(theirs), ours[r], rtol=1e-14, atol=0,
                                   err_msg=f"rank {r} {api} op={op}")


def test_every_case_ran_on_both_world_sizes():
    """No silent gaps: every (collective, op, api) produced a result on every rank."""
    for n in WORLD_SIZES:
        results = world(n)
        expected = {f"{a}|{b}|{c}|{api}" for a, b, c in _cases(n) for api in _variants(a)}
        for r in range(n):
            assert set(results[r]) == expected
