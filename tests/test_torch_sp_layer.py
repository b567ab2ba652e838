"""The sequence-parallel block against PyTorch: autograd with ``F.layer_norm`` (one process),
and PyTorch's own tensor-parallel styles on 2 and 4 real gloo processes.

The DTensor plan is the one of PyTorch's TP tutorial: ``SequenceParallel()`` on the LayerNorm,
``ColwiseParallel(input_layouts=Shard(1))`` on the first linear (AllGather along the sequence),
``RowwiseParallel(output_layouts=Shard(1))`` on the second (ReduceScatter along the sequence).
What torch 2.13 does with the LayerNorm's partial gradients, checked here: ``weight.grad`` is a
DTensor with placement ``Partial(sum)`` whose local value is the rank's own-token sum (the
core's ``G_gamma_partial``); the sum over ranks happens lazily — ``full_tensor()`` gives the
core's reduced gradient, and an optimizer step on the ``Replicate`` parameter applies the full
sum on every rank.  (``loss_parallel`` does not apply: the block's loss is Σ Y ⊙ G, not a
cross-entropy over a sharded vocabulary.)

Each world size is one ``torch.multiprocessing.spawn`` on 127.0.0.1 with a hard deadline, as
in test_torch_collectives.py.
"""

from __future__ import annotations

import datetime
import os
import socket
import tempfile
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from tpmath.record import fields_of
from tpmath.sp_layer import reference_masks, run_sp_layer

pytestmark = pytest.mark.torch

KEYS = ("Y", "G_X", "G_gamma", "G_beta", "G_W1", "G_W2")
DEADLINE_S = 300.0   # a safety net only: 4 spawned torch processes take ~60 s on a loaded 2-core machine


def torch_block(inp: dict, masks: dict | None = None, p: float = 0.0) -> dict:
    """One process, float64: F.layer_norm, tanh, the masks applied as inverted dropout, autograd."""
    X, gamma, beta, W1, W2 = (torch.tensor(inp[k], dtype=torch.float64, requires_grad=True)
                              for k in ("X", "gamma", "beta", "W1", "W2"))
    H = torch.tanh(F.layer_norm(X, (X.shape[-1],), gamma, beta, eps=1e-5) @ W1)
    if masks and masks["H"] is not None:
        H = H * torch.tensor(masks["H"], dtype=torch.float64) / (1 - p)
    O = H @ W2
    if masks and masks["O"] is not None:
        O = O * torch.tensor(masks["O"], dtype=torch.float64) / (1 - p)
    Y = X + O
    loss = (Y * torch.tensor(inp["G"])).sum()
    loss.backward()
    return {"Y": Y.detach().numpy(), "loss": loss.item(), "G_X": X.grad.numpy(), "G_gamma": gamma.grad.numpy(),
            "G_beta": beta.grad.numpy(), "G_W1": W1.grad.numpy(), "G_W2": W2.grad.numpy()}


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


# ------------------------------------------------------------------ one process, autograd

CASES = [(tp, seed, dropout) for tp in (1, 2, 3, 4) for seed in (0, 1, 2) for dropout in (0.0, 0.3)]


@pytest.mark.parametrize("tp, seed, dropout", CASES)
def test_sharded_block_equals_torch_autograd(tp, seed, dropout):
    rng = np.random.default_rng(100 + seed)
    seq, batch, hidden, ffn = tp * int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(2, 9)), \
        tp * int(rng.integers(1, 5))
    r = run_sp_layer(tp=tp, seq=seq, batch=batch, hidden=hidden, ffn=ffn, seed=seed, dropout=dropout)
    t = torch_block(r.inputs, reference_masks(fields_of(r)), dropout)
    for key in KEYS:
        assert maxdiff(getattr(r.sharded, key), t[key]) < 1e-13, key
        assert maxdiff(getattr(r.plain_tp, key), t[key]) < 1e-13, key
    assert abs(r.sharded.loss - t["loss"]) < 1e-12
    for rk in r.ranks:                                      # every rank's own pieces of torch's tensors
        (a, b), (c, d) = rk.seq_range, rk.ffn_range
        assert maxdiff(rk.Y, t["Y"][:, a:b]) < 1e-13
        assert maxdiff(rk.G_X, t["G_X"][:, a:b]) < 1e-13
        assert maxdiff(rk.G_W1, t["G_W1"][:, c:d]) < 1e-13
        assert maxdiff(rk.G_W2, t["G_W2"][c:d]) < 1e-13
        assert maxdiff(rk.G_gamma, t["G_gamma"]) < 1e-13


@pytest.mark.parametrize("mistake", ["ln-grad-not-reduced", "same-dropout-seed", "gather-wrong-dim"])
def test_mistakes_leave_torch_autograd(mistake):
    r = run_sp_layer(tp=2, seq=4, batch=2, hidden=4, ffn=8, mistake=mistake)
    t = torch_block(r.inputs, reference_masks(fields_of(r)), r.dropout)
    assert max(maxdiff(getattr(r.sharded, k), t[k]) for k in KEYS) > 0.1


# ----------------------------------------------------- PyTorch's SequenceParallel on gloo

SP_SIZES = {"seq_per_rank": 2, "batch": 2, "hidden": 5, "ffn_per_rank": 3, "seed": 4}


class Block(torch.nn.Module):
    """Y = X + W2ᵀ-linear(tanh(W1ᵀ-linear(LN(X)))): nn.Linear stores weight = Aᵀ (out, in)."""

    def __init__(self, D: int, F_: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(D, eps=1e-5)
        self.w1 = torch.nn.Linear(D, F_, bias=False)
        self.w2 = torch.nn.Linear(F_, D, bias=False)

    def forward(self, x):
        return x + self.w2(torch.tanh(self.w1(self.norm(x))))


def _worker(rank: int, n: int, port: int, outdir: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=30))
    try:
        s = SP_SIZES
        res = run_sp_layer(tp=n, seq=n * s["seq_per_rank"], batch=s["batch"], hidden=s["hidden"],
                           ffn=n * s["ffn_per_rank"], seed=s["seed"])
        inp = res.inputs
        a, b = res.ranks[rank].seq_range
        m = Block(s["hidden"], n * s["ffn_per_rank"]).double()
        with torch.no_grad():                     # the same values on every rank before parallelizing
            m.norm.weight.copy_(torch.tensor(inp["gamma"]))
            m.norm.bias.copy_(torch.tensor(inp["beta"]))
            m.w1.weight.copy_(torch.tensor(inp["W1"].T))
            m.w2.weight.copy_(torch.tensor(inp["W2"].T))
        mesh = init_device_mesh("cpu", (n,))
        parallelize_module(m, mesh, {"norm": SequenceParallel(),
                                     "w1": ColwiseParallel(input_layouts=Shard(1)),
                                     "w2": RowwiseParallel(output_layouts=Shard(1))})
        x = torch.tensor(inp["X"][:, a:b]).requires_grad_()          # (B, S/T, D) own tokens only
        y = m(x)                                                      # (B, S/T, D) local
        (y * torch.tensor(inp["G"][:, a:b])).sum().backward()
        gw, gb = m.norm.weight.grad, m.norm.bias.grad
        out = {"Y": y.detach().numpy(), "G_X": x.grad.numpy(),
               "G_W1_local": m.w1.weight.grad.to_local().numpy().T, "G_W2_local": m.w2.weight.grad.to_local().numpy().T,
               "w1_grad_placements": str(m.w1.weight.grad.placements),
               "ln_grad_placements": str(gw.placements), "G_gamma_local": gw.to_local().numpy(),
               "G_beta_local": gb.to_local().numpy(), "G_gamma_full": gw.full_tensor().numpy(),
               "G_beta_full": gb.full_tensor().numpy()}
        torch.optim.SGD(m.parameters(), lr=0.1).step()               # the Replicate γ with a Partial grad
        out["gamma_after_step"] = m.norm.weight.to_local().detach().numpy()
        out["gamma_placements"] = str(m.norm.weight.placements)
        torch.save(out, os.path.join(outdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_world(n: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as outdir:
        ctx = mp.spawn(_worker, args=(n, _free_port(), outdir), nprocs=n, join=False)
        deadline = time.monotonic() + DEADLINE_S
        try:
            while not ctx.join(timeout=1.0):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"SequenceParallel on {n} gloo processes did not finish in {DEADLINE_S} s")
        finally:
            for p in ctx.processes:               # only the processes this test spawned
                if p.is_alive():
                    p.terminate()
        return [torch.load(os.path.join(outdir, f"rank{r}.pt"), weights_only=False) for r in range(n)]


@pytest.mark.parametrize("n", (2, 4))
def test_pytorch_sequence_parallel_equals_the_core(n):
    s = SP_SIZES
    core = run_sp_layer(tp=n, seq=n * s["seq_per_rank"], batch=s["batch"], hidden=s["hidden"],
                        ffn=n * s["ffn_per_rank"], seed=s["seed"])
    got = _run_world(n)
    for rk, g in zip(core.ranks, got):
        assert maxdiff(g["Y"], rk.Y) < 1e-13
        assert maxdiff(g["G_X"], rk.G_X) < 1e-13
        assert maxdiff(g["G_W1_local"], rk.G_W1) < 1e-13             # ColwiseParallel: weight rows = A's columns
        assert maxdiff(g["G_W2_local"], rk.G_W2) < 1e-13
        assert g["w1_grad_placements"] == "(Shard(dim=0),)"
        # PyTorch leaves the LayerNorm gradients partial: the local value is the own-token sum ...
        assert g["ln_grad_placements"] == "(Partial(sum),)"
        assert maxdiff(g["G_gamma_local"], rk.G_gamma_partial) < 1e-13
        assert maxdiff(g["G_beta_local"], rk.G_beta_partial) < 1e-13
        # ... and reduces them when asked for the full value, or when the optimizer applies them.
        assert maxdiff(g["G_gamma_full"], core.sharded.G_gamma) < 1e-13
        assert maxdiff(g["G_beta_full"], core.sharded.G_beta) < 1e-13
        assert g["gamma_placements"] == "(Replicate(),)"
        want = core.inputs["gamma"] - 0.1 * core.reference.G_gamma
        assert maxdiff(g["gamma_after_step"], want) < 1e-13
    # the partials differ from rank to rank: without the reduction the replicas would drift apart
    assert maxdiff(got[0]["G_gamma_local"], got[1]["G_gamma_local"]) > 1e-3
