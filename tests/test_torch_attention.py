"""The attention and layer cores against PyTorch (float64 autograd), and a DTensor cross-check.

* ``F.scaled_dot_product_attention`` with GQA (``enable_gqa=True``, and separately the KV heads
  repeated with ``repeat_interleave``), gradients by autograd, for a seeded sweep of shapes,
  causal and not, tp 1/2/4, K in {H, its divisors, 1}: the core's reference and its sharded
  (merged) results;
* the pre-LN layer against ``F.layer_norm`` + SDPA + ``F.gelu(approximate="tanh")``;
* a mistake's numbers against torch doing the same mistake;
* PyTorch's own tensor parallelism (``parallelize_module`` with ``ColwiseParallel`` on
  W_q/W_k/W_v and ``RowwiseParallel`` on W_o; nn.Linear's weight is (out, in) = Aᵀ) on 2 and 4
  gloo processes: forward, every gradient, and each rank's local shards equal the core's.

Selected with ``-m torch``; torch is a test dependency, so a missing torch is an error here.
"""

from __future__ import annotations

import datetime
import math
import os
import random
import socket
import tempfile
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tpmath import attention as att
from tpmath import layer as lay

pytestmark = pytest.mark.torch
T = torch.float64


def t(a, grad=True):
    return torch.tensor(np.asarray(a), dtype=T, requires_grad=grad)


def torch_attention(inp, H, K, causal, gqa="enable_gqa", scale=None):
    """Unsharded attention in torch: Y, loss and autograd gradients of X and the weights."""
    x, wq, wk, wv, wo = (t(inp[k]) for k in ("X", "W_q", "W_k", "W_v", "W_o"))
    B, S, D = x.shape
    E = wq.shape[1] // H
    q = (x @ wq).view(B, S, H, E).transpose(1, 2)
    k = (x @ wk).view(B, S, K, E).transpose(1, 2)
    v = (x @ wv).view(B, S, K, E).transpose(1, 2)
    if gqa == "enable_gqa":
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
    else:                                        # query head h reads KV head h // (H/K)
        k, v = k.repeat_interleave(H // K, dim=1), v.repeat_interleave(H // K, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    y = o.transpose(1, 2).reshape(B, S, H * E) @ wo
    loss = (y * t(inp["G"], False)).sum()
    loss.backward()
    return {"Y": y.detach().numpy(), "loss": loss.item(), "G_X": x.grad.numpy(), "G_W_q": wq.grad.numpy(),
            "G_W_k": wk.grad.numpy(), "G_W_v": wv.grad.numpy(), "G_W_o": wo.grad.numpy()}


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def sweep(n=60, seed=2024):
    """Random valid shapes: tp in 1/2/4, H a multiple of tp, K = H, a divisor of H, or 1."""
    rng = random.Random(seed)
    cases = []
    while len(cases) < n:
        tp = rng.choice((1, 2, 4))
        H = tp * rng.choice((1, 2, 3, 4))
        K = rng.choice([H, 1] + [k for k in range(2, H) if H % k == 0])
        if not (K % tp == 0 if K >= tp else tp % K == 0):
            continue
        E = rng.choice((1, 2, 3, 4))
        cases.append((tp, H, K, E, rng.randint(1, 9), rng.randint(1, 3), rng.random() < 0.5, rng.randrange(10**6)))
    return cases


SWEEP = sweep()


@pytest.mark.parametrize("tp, H, K, E, S, B, causal, seed", SWEEP,
                         ids=[f"tp{c[0]}-H{c[1]}-K{c[2]}-E{c[3]}-S{c[4]}-B{c[5]}-{'causal' if c[6] else 'full'}"
                              for c in SWEEP])
def test_core_against_sdpa_gqa_and_autograd(tp, H, K, E, S, B, causal, seed):
    res = att.run_attention(tp=tp, heads=H, kv_heads=K, seq=S, batch=B, hidden=H * E, seed=seed, causal=causal)
    ref = torch_attention(res.inputs, H, K, causal)
    rep = torch_attention(res.inputs, H, K, causal, gqa="repeat_interleave")
    for key in att.RESULT_KEYS:
        scale = max(1.0, float(np.max(np.abs(ref[key]))))
        for part in ("reference", "sharded"):
            err = maxdiff(getattr(getattr(res, part), key), ref[key])
            assert err <= 1e-13 * scale, (part, key, err)
        assert maxdiff(rep[key], ref[key]) <= 1e-13 * scale, key


LAYER_CASES = [(1, 2, 2, 2, 3, 1, False), (2, 4, 4, 2, 4, 2, True), (2, 4, 1, 3, 5, 1, False),
               (4, 8, 2, 2, 3, 2, True), (4, 4, 4, 1, 6, 1, True), (4, 8, 8, 2, 2, 3, False)]


@pytest.mark.parametrize("tp, H, K, E, S, B, causal", LAYER_CASES)
def test_layer_against_torch_autograd(tp, H, K, E, S, B, causal):
    D = H * E
    res = lay.run_layer(tp=tp, heads=H, kv_heads=K, seq=S, batch=B, hidden=D, ffn=3 * tp * 2, seed=tp + H + K,
                        causal=causal)
    p = {k: t(v) for k, v in res.inputs.items()}
    x = p["X"]
    a1 = F.layer_norm(x, (D,), p["gamma1"], p["beta1"], eps=1e-5)
    q = (a1 @ p["W_q"]).view(B, S, H, E).transpose(1, 2)
    k = (a1 @ p["W_k"]).view(B, S, K, E).transpose(1, 2)
    v = (a1 @ p["W_v"]).view(B, S, K, E).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True).transpose(1, 2).reshape(B, S, D)
    h1 = x + o @ p["W_o"] + p["b_o"]
    a2 = F.layer_norm(h1, (D,), p["gamma2"], p["beta2"], eps=1e-5)
    y = h1 + F.gelu(a2 @ p["W1"] + p["b1"], approximate="tanh") @ p["W2"] + p["b2"]
    loss = (y * p["G"]).sum()
    loss.backward()
    want = {"Y": y.detach().numpy(), "loss": loss.item(),
            **{"G_" + n: p[n].grad.numpy() for n in ("X",) + lay.PARAMS}}
    for key in lay.RESULT_KEYS:
        scale = max(1.0, float(np.max(np.abs(want[key]))))
        for part in ("reference", "sharded"):
            err = maxdiff(getattr(getattr(res, part), key), want[key])
            assert err <= 1e-13 * scale, (part, key, err)


@pytest.mark.parametrize("tp, H, K, causal", [(2, 4, 4, False), (4, 8, 2, True), (1, 4, 1, True)])
def test_scale_mistake_is_torch_with_the_rank_width_scale(tp, H, K, causal):
    res = att.run_attention(tp=tp, heads=H, kv_heads=K, hidden=2 * H, seq=5, causal=causal,
                            mistake="scale-local-width")
    wrong = torch_attention(res.inputs, H, K, causal, scale=1 / math.sqrt(2 * H // tp))
    for key in att.RESULT_KEYS:
        assert maxdiff(getattr(res.sharded, key), wrong[key]) < 1e-12, key
    assert maxdiff(res.sharded.Y, res.reference.Y) > 1e-3


def test_kv_not_replicated_is_torch_reading_the_dealt_heads():
    """Rank r reads KV head r mod K: the merged Y equals torch where query head h reads that head."""
    tp, H, K = 4, 4, 2
    res = att.run_attention(tp=tp, heads=H, kv_heads=K, hidden=8, seq=4, mistake="kv-not-replicated")
    i = res.inputs
    E = 2
    order = [r % K for r in range(tp)]                               # KV head read by query head h = r
    wk = np.concatenate([i["W_k"][:, k * E:(k + 1) * E] for k in order], axis=1)   # one KV head per query head
    wv = np.concatenate([i["W_v"][:, k * E:(k + 1) * E] for k in order], axis=1)
    wrong = torch_attention({**i, "W_k": wk, "W_v": wv}, H, H, False)
    assert maxdiff(res.sharded.Y, wrong["Y"]) < 1e-13
    assert maxdiff(res.sharded.G_X, wrong["G_X"]) < 1e-13


# --------------------------------------------------------------------------- DTensor (gloo)

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

DEADLINE_S = 120.0


def dtensor_cases(n: int):
    """(H, K, S, B, E, causal, seed): K ≥ n (ColwiseParallel splits whole KV heads only then)."""
    return [(n, n, 3, 1, 2, False, 1), (2 * n, n, 4, 2, 2, True, 2), (2 * n, 2 * n, 2, 2, 3, False, 3),
            (4 * n, 2 * n, 5, 1, 1, True, 4)]


class Attention(torch.nn.Module):
    """Attention with nn.Linear projections; head counts read from the (local) shapes, so the
    same module runs unsharded and after parallelize_module (each rank: its heads only)."""

    def __init__(self, D, H, K, E, causal):
        super().__init__()
        self.E, self.causal = E, causal
        self.q_proj = torch.nn.Linear(D, H * E, bias=False, dtype=T)
        self.k_proj = torch.nn.Linear(D, K * E, bias=False, dtype=T)
        self.v_proj = torch.nn.Linear(D, K * E, bias=False, dtype=T)
        self.o_proj = torch.nn.Linear(H * E, D, bias=False, dtype=T)

    def forward(self, x):
        B, S, _ = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)      # local (B, S, ·) after TP
        h, kv = q.shape[-1] // self.E, k.shape[-1] // self.E
        q = q.view(B, S, h, self.E).transpose(1, 2)
        k = k.view(B, S, kv, self.E).transpose(1, 2)
        v = v.view(B, S, kv, self.E).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(B, S, h * self.E))


def _dtensor_worker(rank: int, n: int, port: int, outdir: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=n, timeout=datetime.timedelta(seconds=60))
    mesh = init_device_mesh("cpu", (n,))
    out = []
    try:
        for H, K, S, B, E, causal, seed in dtensor_cases(n):
            inp = att.run_attention(tp=n, heads=H, kv_heads=K, seq=S, batch=B, hidden=H * E, seed=seed,
                                    causal=causal).inputs
            m = Attention(H * E, H, K, E, causal)
            with torch.no_grad():                  # nn.Linear weight is (out, in): Megatron's Aᵀ
                for name, w in (("q_proj", "W_q"), ("k_proj", "W_k"), ("v_proj", "W_v"), ("o_proj", "W_o")):
                    getattr(m, name).weight.copy_(torch.from_numpy(inp[w].T.copy()))
            parallelize_module(m, mesh, {"q_proj": ColwiseParallel(), "k_proj": ColwiseParallel(),
                                         "v_proj": ColwiseParallel(), "o_proj": RowwiseParallel()})
            x = torch.from_numpy(inp["X"].copy()).requires_grad_()
            y = m(x)
            loss = (y * torch.from_numpy(inp["G"])).sum()
            loss.backward()
            rec = {"Y": y.detach().numpy(), "loss": loss.item(), "G_X": x.grad.numpy()}
            for name, w in (("q_proj", "W_q"), ("k_proj", "W_k"), ("v_proj", "W_v"), ("o_proj", "W_o")):
                p = getattr(m, name).weight
                rec["G_" + w] = p.grad.full_tensor().T.numpy()                   # gathered, (in, out)
                rec["local_" + w] = p.to_local().T.detach().numpy()              # this rank's shard
                rec["local_G_" + w] = p.grad.to_local().T.numpy()
            out.append(rec)
        dist.barrier()
    finally:
        torch.save(out, os.path.join(outdir, f"rank{rank}.pt"))
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_WORLDS: dict[int, list] = {}


def dtensor_world(n: int) -> list[list[dict]]:
    """Each rank's records of every case, from one spawn of n gloo processes."""
    if n not in _WORLDS:
        with tempfile.TemporaryDirectory() as outdir:
            ctx = mp.spawn(_dtensor_worker, args=(n, _free_port(), outdir), nprocs=n, join=False)
            deadline = time.monotonic() + DEADLINE_S
            try:
                while not ctx.join(timeout=1.0):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"DTensor run on {n} gloo processes did not finish in {DEADLINE_S} s")
            finally:
                for p in ctx.processes:            # only the processes this test spawned
                    if p.is_alive():
                        p.terminate()
            _WORLDS[n] = [torch.load(os.path.join(outdir, f"rank{r}.pt"), weights_only=False) for r in range(n)]
    return _WORLDS[n]


@pytest.mark.parametrize("n", (2, 4))
def test_dtensor_colwise_rowwise_equals_the_core(n):
    ranks = dtensor_world(n)
    cases = dtensor_cases(n)
    assert all(len(r) == len(cases) for r in ranks)
    for c, (H, K, S, B, E, causal, seed) in enumerate(cases):
        res = att.run_attention(tp=n, heads=H, kv_heads=K, seq=S, batch=B, hidden=H * E, seed=seed, causal=causal)
        for r in range(n):
            got = ranks[r][c]
            for key in att.RESULT_KEYS:           # every rank holds the full Y, loss, G_X and gathered grads
                scale = max(1.0, float(np.max(np.abs(getattr(res.reference, key)))))
                err = maxdiff(got[key], getattr(res.sharded, key))
                assert err <= 1e-13 * scale, (n, c, r, key, err)
            mine = res.ranks[r]
            for w in att.WEIGHTS:                 # PyTorch's shard of rank r = the core's
                assert np.array_equal(got["local_" + w], getattr(mine, w)), (n, c, r, w)
                assert maxdiff(got["local_G_" + w], getattr(mine, "G_" + w)) < 1e-13, (n, c, r, w)

