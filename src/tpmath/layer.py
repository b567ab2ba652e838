"""A whole pre-LN transformer layer with tensor parallelism, forward and backward.

Letters as in :mod:`tpmath.attention`, plus F the MLP width (tp divides F)::

    A1 = LN1(X)                       (B, S, D)   LayerNorm over D, weights gamma1, beta1 (D,)
    H1 = X + Attn(A1) + b_o           (B, S, D)   attention of tpmath.attention, bias of W_o
    A2 = LN2(H1)                      (B, S, D)
    Z  = A2 W1 + b1                   (B, S, F)   W1 (D, F) column parallel, b1 split with it
    M  = GeLU(Z)                      (B, S, F)   GeLU, tanh approximation (Megatron's bias_gelu,
                                                  torch's F.gelu(approximate="tanh"))
    Y  = H1 + M W2 + b2               (B, S, D)   W2 (F, D) row parallel
    L  = Σ Y ⊙ G

Tensor parallel: f before the QKV projections and before W1 (identity forward, AllReduce of
the input gradient backward), g after W_o and after W2 (AllReduce forward, identity
backward): 2 AllReduces forward, 2 backward (plus, when K < tp, the replica-group sums of the
KV weight gradients).  Everything outside the two parallel regions is computed by every rank
on the same values: the LayerNorms (inputs X and H1 are replicated), the residual adds, and
the biases of the row-parallel layers (b_o, b2), added once after g.  Their gradients are
therefore identical on every rank without any communication: G_gamma, G_beta of a LayerNorm
come from its replicated input and the replicated gradient that f's AllReduce has just
completed; G_b_o and G_b2 from the replicated upstream gradient.  (With sequence parallelism
that stops being true; see the sp-layer.)

Inputs (:func:`example_inputs`): X, W_q, W_k, W_v, W_o, G exactly as
:func:`tpmath.attention.example_inputs`; then ``numpy.random.default_rng([seed, 1]).spawn(9)``
for gamma1, beta1, b_o, gamma2, beta2, W1, b1, W2, b2: gamma = 1 + 0.1·N, beta and biases
0.1·N, W1 N/√D, W2 N/√F, all rounded to two decimals with no zeros.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import attention as att
from .attention import F_OP, G_OP, AttentionComm, Config, attention_forward, matmul_op
from .kernels import tanh_fixed, total_fixed  # same bits in CPython and Pyodide (the measured errors shown)
from .validate import as_int, check_divides

LN_EPS = 1e-5                  # torch.nn.LayerNorm's default
GELU_C = math.sqrt(2.0 / math.pi)
MAX_FFN = 512
PARAMS = ("gamma1", "beta1", "W_q", "W_k", "W_v", "W_o", "b_o", "gamma2", "beta2", "W1", "b1", "W2", "b2")
RESULT_KEYS = ("Y", "loss", "G_X") + tuple("G_" + p for p in PARAMS)
REPLICATED = ("gamma1", "beta1", "b_o", "gamma2", "beta2", "b2")


# ----------------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class LayerOutputs:
    """The unsharded layer's Y, loss and the gradient of X and of every parameter (:data:`PARAMS`
    order)."""
    Y: np.ndarray                   # (B, S, D)
    loss: Any                       # 0-d float64
    G_X: np.ndarray                 # (B, S, D)
    G_gamma1: np.ndarray            # (D,)
    G_beta1: np.ndarray             # (D,)
    G_W_q: np.ndarray               # (D, H·E)
    G_W_k: np.ndarray               # (D, K·E)
    G_W_v: np.ndarray               # (D, K·E)
    G_W_o: np.ndarray               # (H·E, D)
    G_b_o: np.ndarray               # (D,)
    G_gamma2: np.ndarray            # (D,)
    G_beta2: np.ndarray             # (D,)
    G_W1: np.ndarray                # (D, F)
    G_b1: np.ndarray                # (F,)
    G_W2: np.ndarray                # (F, D)
    G_b2: np.ndarray                # (D,)


@dataclass(frozen=True, eq=False)
class LayerMerged:
    """The same quantities as :class:`LayerOutputs` merged from the ranks, at full shapes: the
    replicated ones first (as rank 0 holds them), then the sharded ones put back together."""
    Y: np.ndarray                   # (B, S, D)
    loss: Any                       # 0-d float64
    G_X: np.ndarray                 # (B, S, D)
    G_gamma1: np.ndarray            # (D,)  every rank holds the same
    G_beta1: np.ndarray             # (D,)
    G_b_o: np.ndarray               # (D,)
    G_gamma2: np.ndarray            # (D,)
    G_beta2: np.ndarray             # (D,)
    G_b2: np.ndarray                # (D,)
    G_W_q: np.ndarray               # (D, H·E)  the ranks' columns side by side
    G_W_k: np.ndarray               # (D, K·E)  each KV head from the first rank holding it
    G_W_v: np.ndarray               # (D, K·E)
    G_W_o: np.ndarray               # (H·E, D)  the ranks' rows stacked
    G_W1: np.ndarray                # (D, F)
    G_b1: np.ndarray                # (F,)
    G_W2: np.ndarray                # (F, D)


@dataclass(frozen=True, eq=False)
class LayerRank:
    """What rank ``rank`` holds and computes in the layer: its heads and MLP columns, its shards,
    the forward, then every gradient (the replicated parameters' ones as this rank computed
    them); ``shapes`` = the shape of every array field."""
    rank: int
    q_heads: list[int]              # H_r consecutive query heads
    kv_heads: list[int]             # the K_r KV heads it holds (replicated when K < tp)
    ffn_cols: list[int]             # [r·F/tp, (r+1)·F/tp): its columns of W1, rows of W2
    W_q: np.ndarray                 # (D, H_r·E)    column parallel
    W_k: np.ndarray                 # (D, K_r·E)    column parallel, or replicated
    W_v: np.ndarray                 # (D, K_r·E)
    W_o: np.ndarray                 # (H_r·E, D)    row parallel
    W1: np.ndarray                  # (D, F/tp)     column parallel
    b1: np.ndarray                  # (F/tp,)       split with W1's columns
    W2: np.ndarray                  # (F/tp, D)     row parallel
    A1: np.ndarray                  # (B, S, D)     LN1(X), replicated
    Y_attn_partial: np.ndarray      # (B, S, D)     a partial sum over its heads
    H1: np.ndarray                  # (B, S, D)     replicated
    A2: np.ndarray                  # (B, S, D)     LN2(H1), replicated
    Z: np.ndarray                   # (B, S, F/tp)  A2 W1 + b1
    M: np.ndarray                   # (B, S, F/tp)  GeLU(Z)
    Y_mlp_partial: np.ndarray       # (B, S, D)     a partial sum over its columns
    Y: np.ndarray                   # (B, S, D)
    loss: Any                       # 0-d
    G_W_q: np.ndarray               # (D, H_r·E)
    G_W_o: np.ndarray               # (H_r·E, D)
    G_W_k: np.ndarray               # (D, K_r·E)    after the replica-group sum (K < tp)
    G_W_v: np.ndarray               # (D, K_r·E)
    G_W1: np.ndarray                # (D, F/tp)
    G_b1: np.ndarray                # (F/tp,)
    G_W2: np.ndarray                # (F/tp, D)
    G_A2_partial: np.ndarray        # (B, S, D)     before f's backward AllReduce
    G_A1_partial: np.ndarray        # (B, S, D)
    G_X: np.ndarray                 # (B, S, D)
    G_gamma1: np.ndarray            # (D,)          computed whole on every rank, no collective
    G_beta1: np.ndarray             # (D,)
    G_b_o: np.ndarray               # (D,)
    G_gamma2: np.ndarray            # (D,)
    G_beta2: np.ndarray             # (D,)
    G_b2: np.ndarray                # (D,)
    shapes: dict[str, list[int]]    # field -> shape, for every array field above


@dataclass(frozen=True, eq=False)
class LayerResult:
    """The pre-LN layer sharded over tp ranks next to its unsharded reference (:func:`run_layer`)."""
    config: dict[str, Any]          # tp heads kv_heads head_dim seq batch hidden ffn causal seed activation ln_eps
    inputs: dict[str, np.ndarray]   # X, every parameter (:data:`PARAMS`), G
    reference: LayerOutputs
    sharded: LayerMerged
    max_abs_err: dict[str, float]   # per field of ``reference``
    tolerances: dict[str, float]
    matches_reference: bool
    ranks: list[LayerRank]          # one per rank, in rank order
    comm: list[AttentionComm]
    replica_spread: dict[str, float]  # Y, G_X and the replicated parameters: max |rank r − rank 0| (0)


# --------------------------------------------------------------------------------- ops

def layer_norm_op(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = LN_EPS):
    """y = (x − mean) / √(var + eps) · gamma + beta over the last axis (biased variance)."""
    xc = x - x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
    xhat = xc * rstd                                          # (…, D)
    y = xhat * gamma + beta

    def back(g):
        D = x.shape[-1]
        G_gamma = (g * xhat).reshape(-1, D).sum(axis=0)       # (D,) every row adds
        G_beta = g.reshape(-1, D).sum(axis=0)                 # (D,)
        gh = g * gamma                                        # dL/dxhat
        # d xhat / dx removes the mean and the component along xhat, then scales by 1/σ
        G_x = rstd * (gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True))
        return G_x, G_gamma, G_beta
    return y, back


def gelu_op(z: np.ndarray):
    """GeLU, tanh approximation: ½ z (1 + tanh(√(2/π) (z + 0.044715 z³)))."""
    t = tanh_fixed(GELU_C * (z + 0.044715 * (z * z * z)))
    y = 0.5 * z * (1.0 + t)

    def back(g):
        return g * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * z * z))
    return y, back


def bias_op(y: np.ndarray, b: np.ndarray):
    """y + b (b broadcast over every row)."""
    def back(g):
        return g, g.reshape(-1, g.shape[-1]).sum(axis=0)      # (…, n), (n,)
    return y + b, back


# ------------------------------------------------------------------------------ inputs

def validate_layer(tp: Any, heads: Any, kv_heads: Any, seq: Any, batch: Any, hidden: Any, ffn: Any,
                   causal: Any) -> tuple[Config, int]:
    """The attention's rules (:func:`tpmath.attention.validate_config`) and tp | ffn."""
    cfg = att.validate_config(tp, heads, kv_heads, seq, batch, hidden, causal)
    F = 4 * cfg.hidden if ffn is None else as_int("ffn", ffn, 1, MAX_FFN)
    check_divides(cfg.tp, F, "tp", "ffn")
    return cfg, F


def example_inputs(seed: Any, cfg: Config, ffn: int) -> dict[str, np.ndarray]:
    """The attention's inputs plus LayerNorm, bias and MLP parameters (module docstring)."""
    base = att.example_inputs(seed, cfg)
    seed = as_int("seed", seed, 0, att.MAX_SEED)
    D, F = cfg.hidden, ffn
    g = np.random.default_rng([seed, 1]).spawn(9)
    r2 = lambda v: att._readable(v, 2)                        # noqa: E731
    return {
        "X": base["X"], "gamma1": r2(1 + 0.1 * g[0].standard_normal(D)), "beta1": r2(0.1 * g[1].standard_normal(D)),
        **{w: base[w] for w in att.WEIGHTS}, "b_o": r2(0.1 * g[2].standard_normal(D)),
        "gamma2": r2(1 + 0.1 * g[3].standard_normal(D)), "beta2": r2(0.1 * g[4].standard_normal(D)),
        "W1": r2(g[5].standard_normal((D, F)) / math.sqrt(D)), "b1": r2(0.1 * g[6].standard_normal(F)),
        "W2": r2(g[7].standard_normal((F, D)) / math.sqrt(F)), "b2": r2(0.1 * g[8].standard_normal(D)),
        "G": base["G"],
    }


# ------------------------------------------------------------------------------- model

def reference_layer(p: dict, heads: int, kv_heads: int, causal: bool) -> LayerOutputs:
    """The unsharded layer (one device): Y, loss and every gradient."""
    X, G = p["X"], p["G"]
    E = p["W_q"].shape[1] // heads
    A1, b_ln1 = layer_norm_op(X, p["gamma1"], p["beta1"])
    at, b_at = attention_forward(A1, *(p[w] for w in att.WEIGHTS), heads, kv_heads, 1 / math.sqrt(E), causal)
    Yo, b_bo = bias_op(at["Y"], p["b_o"])
    H1 = X + Yo
    A2, b_ln2 = layer_norm_op(H1, p["gamma2"], p["beta2"])
    Z, b_z = matmul_op(A2, p["W1"])
    Zb, b_b1 = bias_op(Z, p["b1"])
    M, b_m = gelu_op(Zb)
    Y2, b_y2 = matmul_op(M, p["W2"])
    Yb, b_b2 = bias_op(Y2, p["b2"])
    Y = H1 + Yb

    G_Y2, G_b2 = b_b2(G)
    G_M, G_W2 = b_y2(G_Y2)
    G_Z, G_b1 = b_b1(b_m(G_M))
    G_A2, G_W1 = b_z(G_Z)
    G_H1_ln, G_gamma2, G_beta2 = b_ln2(G_A2)
    G_H1 = G + G_H1_ln                                        # residual: both paths add
    G_Yatt, G_b_o = b_bo(G_H1)
    ga = b_at(G_Yatt)
    G_X_ln, G_gamma1, G_beta1 = b_ln1(ga["G_X"])
    return LayerOutputs(Y=Y, loss=total_fixed(Y * G), G_X=G_H1 + G_X_ln, G_gamma1=G_gamma1, G_beta1=G_beta1,
                        G_W_q=ga["G_W_q"], G_W_k=ga["G_W_k"], G_W_v=ga["G_W_v"], G_W_o=ga["G_W_o"],
                        G_b_o=G_b_o, G_gamma2=G_gamma2, G_beta2=G_beta2, G_W1=G_W1, G_b1=G_b1,
                        G_W2=G_W2, G_b2=G_b2)


def sharded_layer(p: dict, cfg: Config, F: int) -> dict:
    """The layer on tp ranks: ``ranks`` (records), ``sharded`` (merged), ``comm``, ``replica_spread``."""
    tp, X, G = cfg.tp, p["X"], p["G"]
    B, S, D = X.shape
    Fr, E = F // tp, cfg.head_dim
    heads = [att.rank_heads(cfg, r) for r in range(tp)]
    kv_of_rank = [kv for _, kv in heads]
    sh = [att.shard(p, cfg, q, kv) for q, kv in heads]
    W1 = [p["W1"][:, r * Fr:(r + 1) * Fr] for r in range(tp)]   # (D, F/tp) column parallel
    b1 = [p["b1"][r * Fr:(r + 1) * Fr] for r in range(tp)]      # (F/tp,) split with W1's columns
    W2 = [p["W2"][r * Fr:(r + 1) * Fr, :] for r in range(tp)]   # (F/tp, D) row parallel
    each = range(tp)

    # forward: replicated LayerNorm, then the attention region between f and g
    ln1 = [layer_norm_op(X, p["gamma1"], p["beta1"]) for _ in each]            # tp × (B, S, D), identical
    A1 = F_OP.forward([y for y, _ in ln1])
    at = [attention_forward(A1[r], *(sh[r][w] for w in att.WEIGHTS), cfg.q_per_rank, cfg.kv_per_rank,
                            att.softmax_scale(cfg), cfg.causal) for r in each]
    Yat = G_OP.forward([v["Y"] for v, _ in at])                                # AllReduce #1
    bo = [bias_op(Yat[r], p["b_o"]) for r in each]                             # b_o added once, after g
    H1 = [X + y for y, _ in bo]                                                # (B, S, D) replicated
    ln2 = [layer_norm_op(H1[r], p["gamma2"], p["beta2"]) for r in each]
    A2 = F_OP.forward([y for y, _ in ln2])
    z = [matmul_op(A2[r], W1[r]) for r in each]                                # (B, S, F/tp)
    zb = [bias_op(z[r][0], b1[r]) for r in each]
    m = [gelu_op(zb[r][0]) for r in each]                                      # elementwise: stays local
    y2 = [matmul_op(m[r][0], W2[r]) for r in each]                             # (B, S, D) partial
    Y2 = G_OP.forward([y for y, _ in y2])                                      # AllReduce #2
    b2 = [bias_op(Y2[r], p["b2"]) for r in each]
    Y = [H1[r] + b2[r][0] for r in each]

    # backward: G is the replicated upstream gradient, used once per rank
    g_b2 = [b2[r][1](G) for r in each]                                         # (G_Y2, G_b2) identical
    G_Y2 = G_OP.backward([g for g, _ in g_b2])
    g_y2 = [y2[r][1](G_Y2[r]) for r in each]                                   # (G_M, G_W2 shard)
    g_b1 = [zb[r][1](m[r][1](g_y2[r][0])) for r in each]                       # (G_Z, G_b1 shard)
    g_z = [z[r][1](g_b1[r][0]) for r in each]                                  # (G_A2 partial, G_W1 shard)
    G_A2 = F_OP.backward([g for g, _ in g_z])                                  # AllReduce #3
    g_ln2 = [ln2[r][1](G_A2[r]) for r in each]                                 # from replicated values
    G_H1 = [G + g_ln2[r][0] for r in each]
    g_bo = [bo[r][1](G_H1[r]) for r in each]
    G_Yat = G_OP.backward([g for g, _ in g_bo])
    ga = [at[r][1](G_Yat[r]) for r in each]
    G_A1 = F_OP.backward([g["G_X"] for g in ga])                               # AllReduce #4
    g_ln1 = [ln1[r][1](G_A1[r]) for r in each]
    G_X = [G_H1[r] + g_ln1[r][0] for r in each]

    groups = att.kv_groups(kv_of_rank)
    reduce_kv = (lambda parts: att.all_reduce_groups(parts, groups)) if cfg.kv_heads < tp else att.identity
    G_W_k = reduce_kv([g["G_W_k"] for g in ga])
    G_W_v = reduce_kv([g["G_W_v"] for g in ga])

    repl = {"gamma1": [g[1] for g in g_ln1], "beta1": [g[2] for g in g_ln1], "b_o": [g[1] for g in g_bo],
            "gamma2": [g[1] for g in g_ln2], "beta2": [g[2] for g in g_ln2], "b2": [g[1] for g in g_b2]}
    ranks = []
    for r in each:
        q, kv = heads[r]
        rec = {"rank": r, "q_heads": q, "kv_heads": kv, "ffn_cols": [r * Fr, (r + 1) * Fr],
               **sh[r], "W1": W1[r], "b1": b1[r], "W2": W2[r],
               "A1": A1[r], "Y_attn_partial": at[r][0]["Y"], "H1": H1[r], "A2": A2[r], "Z": zb[r][0],
               "M": m[r][0], "Y_mlp_partial": y2[r][0], "Y": Y[r], "loss": total_fixed(Y[r] * G),
               "G_W_q": ga[r]["G_W_q"], "G_W_o": ga[r]["G_W_o"], "G_W_k": G_W_k[r], "G_W_v": G_W_v[r],
               "G_W1": g_z[r][1], "G_b1": g_b1[r][1], "G_W2": g_y2[r][1],
               "G_A2_partial": g_z[r][0], "G_A1_partial": ga[r]["G_X"], "G_X": G_X[r],
               **{"G_" + k: v[r] for k, v in repl.items()}}
        rec["shapes"] = {k: list(np.shape(v)) for k, v in rec.items() if isinstance(v, np.ndarray)}
        ranks.append(LayerRank(**rec))

    merged = LayerMerged(
        Y=Y[0], loss=ranks[0].loss, G_X=G_X[0],
        **{"G_" + k: v[0] for k, v in repl.items()},                            # every rank holds the same
        G_W_q=np.concatenate([g["G_W_q"] for g in ga], axis=1),                 # (D, H·E)
        G_W_k=att.merge_kv(G_W_k, kv_of_rank, cfg.kv_heads, E),
        G_W_v=att.merge_kv(G_W_v, kv_of_rank, cfg.kv_heads, E),
        G_W_o=np.concatenate([g["G_W_o"] for g in ga], axis=0),                 # (H·E, D)
        G_W1=np.concatenate([g[1] for g in g_z], axis=1),                       # (D, F)
        G_b1=np.concatenate([g[1] for g in g_b1]),                              # (F,)
        G_W2=np.concatenate([g[1] for g in g_y2], axis=0))                      # (F, D)
    spread = {"Y": att.spread(Y), "G_X": att.spread(G_X), **{k: att.spread(v) for k, v in repl.items()}}

    comm = []
    if tp > 1:
        full = B * S * D
        everyone = [list(range(tp))]
        comm = [AttentionComm(phase, "all-reduce", op, tensor, full, everyone)
                for phase, op, tensor in (("forward", G_OP.name, "Y_attn"), ("forward", G_OP.name, "Y_mlp"),
                                          ("backward", F_OP.name, "G_A2"), ("backward", F_OP.name, "G_A1"))]
        if cfg.kv_heads < tp:
            comm += [AttentionComm("backward", "all-reduce", "kv-replicas", t, D * cfg.kv_per_rank * E, groups)
                     for t in ("G_W_k", "G_W_v")]
    return {"ranks": ranks, "sharded": merged, "comm": comm, "replica_spread": spread}


def run_layer(tp: Any = 2, heads: Any = 4, kv_heads: Any = None, seq: Any = 4, batch: Any = 1, hidden: Any = 8,
              ffn: Any = None, seed: Any = 0, causal: Any = False) -> LayerResult:
    """The pre-LN layer sharded over tp ranks next to its unsharded reference (float64): a
    :class:`LayerResult`."""
    cfg, F = validate_layer(tp, heads, kv_heads, seq, batch, hidden, ffn, causal)
    seed = as_int("seed", seed, 0, att.MAX_SEED)
    p = example_inputs(seed, cfg, F)
    reference = reference_layer(p, cfg.heads, cfg.kv_heads, cfg.causal)
    run = sharded_layer(p, cfg, F)
    return LayerResult(
        config={"tp": cfg.tp, "heads": cfg.heads, "kv_heads": cfg.kv_heads, "head_dim": cfg.head_dim,
                "seq": cfg.seq, "batch": cfg.batch, "hidden": cfg.hidden, "ffn": F, "causal": cfg.causal,
                "seed": seed, "activation": "gelu-tanh", "ln_eps": LN_EPS},
        inputs=p, reference=reference, sharded=run["sharded"], **att.compare(run["sharded"], reference),
        ranks=run["ranks"], comm=run["comm"], replica_spread=run["replica_spread"])


@functools.lru_cache(maxsize=32)
def _cached(cfg: Config, F: int, seed: int) -> LayerResult:
    return run_layer(cfg.tp, cfg.heads, cfg.kv_heads, cfg.seq, cfg.batch, cfg.hidden, F, seed, cfg.causal)


def cached_run(tp: Any = 2, heads: Any = 4, kv_heads: Any = None, seq: Any = 4, batch: Any = 1, hidden: Any = 8,
               ffn: Any = None, seed: Any = 0, causal: Any = False) -> LayerResult:
    """:func:`run_layer` memoised per validated configuration (a page section and its real-ranks
    block show the same run).  The result is shared: callers must not modify it."""
    cfg, F = validate_layer(tp, heads, kv_heads, seq, batch, hidden, ffn, causal)
    return _cached(cfg, F, as_int("seed", seed, 0, att.MAX_SEED))
