"""Multi-head attention with GQA, tensor-parallel by heads (Megatron §3, Fig. 3b), forward and backward.

Letters
-------
B batch     S sequence     D hidden     H query heads     K KV heads (K divides H)
E = D/H head size          tp ranks     r a rank          H_r = H/tp query heads per rank
K_r KV heads per rank: K/tp when K ≥ tp, else 1 (each KV head replicated on tp/K ranks)

The model, in Megatron's orientation ``Y = X A`` with ``A`` of shape (in, out)::

    Q = X W_q                     (B, S, H·E)   head h = columns [h·E, (h+1)·E) of W_q
    K = X W_k,  V = X W_v         (B, S, K·E)   KV head k = columns [k·E, (k+1)·E)
    query head h reads KV head ⌊h·K/H⌋          (GQA; K = H: multi-head, K = 1: multi-query)
    A_h = Q_h K_kᵀ / √E           (B, H, S, S)  scores (before the mask)
    P_h = softmax(A_h)            (B, H, S, S)  along the keys; causal: key j > query i gets 0
    C = [P_0 V_k(0), …]           (B, S, H·E)   heads concatenated in head order ("context")
    Y = C W_o                     (B, S, D)     W_o (H·E, D)
    L = Σ Y ⊙ G                                 so the upstream gradient is G_Y = G

Tensor parallel (Megatron): rank r holds the query heads [r·H_r, (r+1)·H_r), i.e. those
columns of W_q (column parallel) and the same rows of W_o (row parallel), and the KV heads
its query heads read: K ≥ tp: heads [r·K/tp, (r+1)·K/tp) (Megatron requires tp | K);
K < tp (tp divisible by K): the one head ⌊r·K/tp⌋, replicated on the tp/K consecutive ranks
whose query heads read it, as inference engines (vLLM) do.  Attention itself needs no
communication: a head's softmax sees only its own scores.  Megatron's operator f (identity
forward, AllReduce backward) sits before the QKV projections, f̄ (AllReduce forward, identity
backward) after W_o.  A replicated KV weight gets a partial gradient on each of its replicas
(each from its own query heads): in training those are summed over the replica group.

Every op below returns ``(out, back)`` where ``back(G_out)`` gives the gradients of its
inputs: forward and backward are written by hand side by side (micrograd style), and the
models only compose ops.  The same composition runs unsharded (the reference) and on each
rank's shards with the rank's head counts.

Mistakes (``mistake``), computed so a page can show how far they leave the reference:

* ``f-and-g-swapped``   f̄ before QKV and f after W_o: forward sums the replicated X (tp·X)
  and never sums the partial Y; backward sums the replicated G_Y (tp·G) and never sums G_X;
* ``kv-not-replicated`` (1 < K < tp) KV heads dealt round robin, rank r holds head r mod K,
  instead of replicating head ⌊r·K/tp⌋ on consecutive ranks: a rank reads a wrong KV head;
* ``kv-grad-not-summed`` (K < tp) the partial gradients of a replicated KV weight are not
  summed over its replicas: each replica keeps its own part and the replicas drift apart;
* ``scale-local-width`` (H_r > 1) softmax scale 1/√(H_r·E) from the rank's projection width
  instead of 1/√E from the head size.

Inputs (:func:`example_inputs`): ``numpy.random.default_rng(seed).spawn(6)`` gives one
generator per tensor, in the order X, W_q, W_k, W_v, W_o, G; X and G are standard normal
draws rounded to one decimal, each weight a standard normal draw over √fan-in rounded to two
decimals (W_k, W_v: the first K·E of H·E drawn columns, so fewer KV heads keep the same first
heads); an entry that would round to 0 becomes ±0.1 / ±0.01 (a zero could hide a wrong slice).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np

from .collectives import reduce_all
from .errors import TPMathError
from .kernels import exp_fixed, matmul_fixed as mm, total_fixed  # same bits in CPython and Pyodide
from .i18n import Text, option
from .record import fields_of
from .validate import as_choice, as_flag, as_int

MISTAKES = ("none", "f-and-g-swapped", "kv-not-replicated", "kv-grad-not-summed", "scale-local-width")
RESULT_KEYS = ("Y", "loss", "G_X", "G_W_q", "G_W_k", "G_W_v", "G_W_o")
WEIGHTS = ("W_q", "W_k", "W_v", "W_o")

MAX_TP = 8
MAX_HEADS = 16
MAX_HIDDEN = 128
MAX_SEQ = 16
MAX_BATCH = 4
MAX_SEED = 2**32 - 1
DEFAULTS = {"tp": 2, "heads": 4, "kv_heads": None, "seq": 4, "batch": 1, "hidden": 8, "seed": 0}
# Allowed |sharded − reference| relative to the largest reference value: sharding only
# reorders float64 additions of at most a few hundred terms here (errors ~1e-16 · that).
REL_TOL = 1e-12


# ------------------------------------------------------------------------------ config

@dataclass(frozen=True)
class Config:
    """A validated attention configuration (see :func:`validate_config`)."""

    tp: int
    heads: int
    kv_heads: int
    seq: int
    batch: int
    hidden: int
    causal: bool = False
    mistake: str = "none"

    @property
    def head_dim(self) -> int:                 # E
        return self.hidden // self.heads

    @property
    def q_per_rank(self) -> int:               # H_r
        return self.heads // self.tp

    @property
    def kv_per_rank(self) -> int:              # K_r
        return max(1, self.kv_heads // self.tp)

    @property
    def replicas(self) -> int:                 # ranks holding each KV head
        return max(1, self.tp // self.kv_heads)


def validate_config(tp: Any = 2, heads: Any = 4, kv_heads: Any = None, seq: Any = 4, batch: Any = 1,
                    hidden: Any = 8, causal: Any = False, mistake: Any = "none") -> Config:
    """Sizes in range and the head split possible; every message names the rule broken."""
    tp = as_int("tp", tp, 1, MAX_TP)
    H = as_int("heads", heads, 1, MAX_HEADS)
    K = H if kv_heads is None else as_int("kv_heads", kv_heads, 1, MAX_HEADS)
    S = as_int("seq", seq, 1, MAX_SEQ)
    B = as_int("batch", batch, 1, MAX_BATCH)
    D = as_int("hidden", hidden, 1, MAX_HIDDEN)
    mistake = as_choice("mistake", mistake, MISTAKES)
    if H % tp:
        raise TPMathError("heads_not_divisible", "heads", heads=H, tp=tp)
    if H % K:
        raise TPMathError("kv_not_dividing_heads", "kv_heads", kv_heads=K, heads=H)
    if K >= tp and K % tp:
        raise TPMathError("kv_split_uneven", "kv_heads", kv_heads=K, tp=tp)
    if K < tp and tp % K:
        raise TPMathError("kv_replicas_uneven", "kv_heads", kv_heads=K, tp=tp)
    if D % H:
        raise TPMathError("head_size_uneven", "hidden", hidden=D, heads=H)
    cfg = Config(tp, H, K, S, B, D, as_flag("causal", causal), mistake)
    needs = mistake_needs(cfg)
    if needs is not None:
        raise TPMathError("mistake_needs", "mistake", mistake=option("mistake", mistake), need=needs, tp=tp, heads=H,
                          kv_heads=K)
    return cfg


def mistake_needs(cfg: Config) -> Text | None:
    """None when ``cfg.mistake`` changes something at these sizes, else what it needs, as a
    translation cell (a page disables the choice with this reason)."""
    m, tp, K = cfg.mistake, cfg.tp, cfg.kv_heads
    if m == "f-and-g-swapped" and tp == 1:
        return Text("need.tp_gt_1")
    if m == "kv-not-replicated" and not 1 < K < tp:
        return Text("need.kv_replicated_several")
    if m == "kv-grad-not-summed" and not K < tp:
        return Text("need.kv_replicated")
    if m == "scale-local-width" and cfg.q_per_rank == 1:
        return Text("need.several_heads_per_rank")
    return None


def kv_head_of(h: int, heads: int, kv_heads: int) -> int:
    """The KV head query head ``h`` reads: ⌊h·K/H⌋ (groups of H/K consecutive query heads)."""
    return h * kv_heads // heads


def rank_heads(cfg: Config, r: int) -> tuple[list[int], list[int]]:
    """(query heads, KV heads) rank r holds; under ``kv-not-replicated`` its (wrong) KV head."""
    Hr, Kr = cfg.q_per_rank, cfg.kv_per_rank
    q = list(range(r * Hr, (r + 1) * Hr))
    if cfg.kv_heads >= cfg.tp:
        return q, list(range(r * Kr, (r + 1) * Kr))
    if cfg.mistake == "kv-not-replicated":
        return q, [r % cfg.kv_heads]                      # round robin: not the head its queries read
    return q, [kv_head_of(q[0], cfg.heads, cfg.kv_heads)]   # = ⌊r·K/tp⌋, the same for all its heads


# ----------------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class AttentionOutputs:
    """Y, the loss and the five gradients at full shapes: the unsharded reference, or merged
    from the ranks (a replicated value as rank 0 holds it)."""
    Y: np.ndarray                   # (B, S, D)
    loss: Any                       # 0-d float64
    G_X: np.ndarray                 # (B, S, D)
    G_W_q: np.ndarray               # (D, H·E)
    G_W_k: np.ndarray               # (D, K·E)
    G_W_v: np.ndarray               # (D, K·E)
    G_W_o: np.ndarray               # (H·E, D)


@dataclass(frozen=True, eq=False)
class AttentionRank:
    """What rank ``rank`` holds and computes: its heads, its shards, the forward of its heads
    (no communication inside), then the backward; ``shapes`` = the shape of every array field."""
    rank: int
    q_heads: list[int]              # H_r consecutive query heads
    kv_heads: list[int]             # the K_r KV heads it holds (replicated when K < tp)
    W_q: np.ndarray                 # (D, H_r·E)   column parallel
    W_k: np.ndarray                 # (D, K_r·E)   column parallel, or replicated
    W_v: np.ndarray                 # (D, K_r·E)
    W_o: np.ndarray                 # (H_r·E, D)   row parallel
    X_in: np.ndarray                # (B, S, D)    X after the operator entering the region
    Q: np.ndarray                   # (B, S, H_r·E)
    K: np.ndarray                   # (B, S, K_r·E)
    V: np.ndarray                   # (B, S, K_r·E)
    scores: np.ndarray              # (B, H_r, S, S) before the mask
    probs: np.ndarray               # (B, H_r, S, S)
    context: np.ndarray             # (B, S, H_r·E)
    Y_partial: np.ndarray           # (B, S, D)    a partial sum over its heads
    Y: np.ndarray                   # (B, S, D)    after the operator leaving the region
    loss: Any                       # 0-d: Σ Y ⊙ G as this rank sees it
    G_Y: np.ndarray                 # (B, S, D)    the upstream gradient after that operator's backward
    G_context: np.ndarray           # (B, S, H_r·E)
    G_probs: np.ndarray             # (B, H_r, S, S)
    G_scores: np.ndarray            # (B, H_r, S, S)
    G_Q: np.ndarray                 # (B, S, H_r·E)
    G_K: np.ndarray                 # (B, S, K_r·E)
    G_V: np.ndarray                 # (B, S, K_r·E)
    G_W_q: np.ndarray               # (D, H_r·E)   complete locally
    G_W_o: np.ndarray               # (H_r·E, D)   complete locally
    G_W_k_partial: np.ndarray       # (D, K_r·E)   from its own query heads only
    G_W_v_partial: np.ndarray       # (D, K_r·E)
    G_W_k: np.ndarray               # (D, K_r·E)   after the replica-group sum (K < tp)
    G_W_v: np.ndarray               # (D, K_r·E)
    G_X_partial: np.ndarray         # (B, S, D)    a partial sum over its heads
    G_X: np.ndarray                 # (B, S, D)    after the entering operator's backward
    shapes: dict[str, list[int]]    # field -> shape, for every array field above


@dataclass(frozen=True, eq=False)
class AttentionComm:
    """One collective of a run: its phase, the Megatron operator (or the KV replica group) that
    issues it, the tensor, its elements and the groups of ranks it runs in."""
    phase: str                      # forward / backward
    collective: str                 # all-reduce
    operator: str                   # f, f̄ (Korthikanti et al.'s letters), kv-replicas
    tensor: str
    elements: int
    groups: list[list[int]]


@dataclass(frozen=True, eq=False)
class AttentionResult:
    """Attention sharded over tp ranks next to its unsharded reference (:func:`run_attention`)."""
    config: dict[str, Any]          # tp heads kv_heads head_dim seq batch hidden causal mistake seed scale
    inputs: dict[str, np.ndarray]   # X (B, S, D), W_q (D, H·E), W_k W_v (D, K·E), W_o (H·E, D), G (B, S, D)
    reference: AttentionOutputs
    sharded: AttentionOutputs
    max_abs_err: dict[str, float]   # per field of ``reference``
    tolerances: dict[str, float]
    matches_reference: bool
    ranks: list[AttentionRank]      # one per rank, in rank order
    comm: list[AttentionComm]
    replica_spread: dict[str, float]  # Y loss G_X G_W_k G_W_v: max |rank's copy − rank 0's|
    kv_replication: dict[str, Any]  # :func:`kv_replication_cost`


# ------------------------------------------------------------------------------ inputs

def _readable(v: np.ndarray, decimals: int) -> np.ndarray:
    """``v`` rounded to ``decimals``, with no zeros."""
    r = np.round(v, decimals)
    return np.where(r == 0, np.copysign(10.0 ** -decimals, v), r)


def example_inputs(seed: Any, cfg: Config) -> dict[str, np.ndarray]:
    """Deterministic, readable float64 inputs (the generator is described in the module docstring)."""
    seed = as_int("seed", seed, 0, MAX_SEED)
    B, S, D, H, K, E = cfg.batch, cfg.seq, cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim
    g = np.random.default_rng(seed).spawn(6)
    w = lambda rng, fan_in, cols: _readable(rng.standard_normal((fan_in, cols)) / math.sqrt(fan_in), 2)  # noqa: E731
    return {
        "X": _readable(g[0].standard_normal((B, S, D)), 1),
        "W_q": w(g[1], D, H * E),
        "W_k": w(g[2], D, H * E)[:, :K * E],
        "W_v": w(g[3], D, H * E)[:, :K * E],
        "W_o": w(g[4], H * E, D),
        "G": _readable(g[5].standard_normal((B, S, D)), 1),
    }


# --------------------------------------------------------------------------------- ops
# Each op returns (out, back); back(G_out) returns the gradients of the op's inputs.

def matmul_op(x: np.ndarray, W: np.ndarray):
    """y = x W over the last axis: x (…, I), W (I, O) -> (…, O)."""
    y = mm(x, W)

    def back(g):                                              # g (…, O)
        G_x = mm(g, W.T)                                        # (…, I)
        G_W = mm(x.reshape(-1, x.shape[-1]).T, g.reshape(-1, g.shape[-1]))   # (I, O): every row adds
        return G_x, G_W
    return y, back


def split_heads_op(x: np.ndarray, n: int):
    """(B, S, n·E) -> (B, n, S, E): head h is columns [h·E, (h+1)·E)."""
    B, S, W = x.shape
    y = x.reshape(B, S, n, W // n).transpose(0, 2, 1, 3)

    def back(g):                                              # (B, n, S, E) -> (B, S, n·E)
        return g.transpose(0, 2, 1, 3).reshape(B, S, W)
    return y, back


def merge_heads_op(x: np.ndarray):
    """(B, n, S, E) -> (B, S, n·E): heads side by side in head order."""
    B, n, S, E = x.shape
    y = x.transpose(0, 2, 1, 3).reshape(B, S, n * E)

    def back(g):                                              # (B, S, n·E) -> (B, n, S, E)
        return g.reshape(B, S, n, E).transpose(0, 2, 1, 3)
    return y, back


def repeat_kv_op(kv: np.ndarray, heads: int):
    """(B, K, S, E) -> (B, H, S, E): query head h reads KV head ⌊h·K/H⌋."""
    B, K, S, E = kv.shape
    group = heads // K
    y = np.repeat(kv, group, axis=1)                          # [kv0, kv0, kv1, kv1, …]

    def back(g):                       # a KV head served `group` query heads: its gradient is their sum
        return g.reshape(B, K, group, S, E).sum(axis=2)
    return y, back


def scores_op(q: np.ndarray, k: np.ndarray, scale: float):
    """A = q kᵀ · scale: (B, n, S, E), (B, n, S, E) -> (B, n, S, S)."""
    a = mm(q, k.swapaxes(-1, -2)) * scale

    def back(g):
        g = g * scale
        return mm(g, k), mm(g.swapaxes(-1, -2), q)                 # G_q, G_k (B, n, S, E)
    return a, back


def softmax_op(a: np.ndarray, causal: bool):
    """P = softmax(A) along the keys; causal: key j > query i has A = −∞, so P = 0."""
    if causal:
        a = np.where(np.tri(a.shape[-1], dtype=bool), a, -np.inf)   # row i keeps keys 0..i
    e = exp_fixed(a - a.max(axis=-1, keepdims=True))              # the diagonal keeps every row finite
    p = e / e.sum(axis=-1, keepdims=True)

    def back(g):
        # Jacobian of softmax: dA = P ⊙ (dP − Σ_j dP ⊙ P); masked entries have P = 0, so dA = 0
        return p * (g - (g * p).sum(axis=-1, keepdims=True))
    return p, back


def weighted_sum_op(p: np.ndarray, v: np.ndarray):
    """O = P V: (B, n, S, S), (B, n, S, E) -> (B, n, S, E)."""
    o = mm(p, v)

    def back(g):
        return mm(g, v.swapaxes(-1, -2)), mm(p.swapaxes(-1, -2), g)  # G_p, G_v
    return o, back


def attention_forward(X: np.ndarray, W_q: np.ndarray, W_k: np.ndarray, W_v: np.ndarray, W_o: np.ndarray,
                      heads: int, kv_heads: int, scale: float, causal: bool) -> tuple[dict, Callable]:
    """Attention on one device (the whole model, or one rank with its heads and shards).

    Returns (values, back): values ``Q K V`` (B, S, ··E) projections, ``scores`` (B, n, S, S)
    before the mask, ``probs`` (B, n, S, S), ``context`` (B, S, n·E), ``Y`` (B, S, D) (a partial
    sum on a rank); ``back(G_Y)`` returns the gradients of X and the four weights and the
    intermediate ones (``G_context G_probs G_scores G_Q G_K G_V``).
    """
    Q, bQ = matmul_op(X, W_q)                                 # (B, S, n·E)
    K, bK = matmul_op(X, W_k)                                 # (B, S, m·E)
    V, bV = matmul_op(X, W_v)                                 # (B, S, m·E)
    q, bq = split_heads_op(Q, heads)                          # (B, n, S, E)
    k, bk = split_heads_op(K, kv_heads)                       # (B, m, S, E)
    v, bv = split_heads_op(V, kv_heads)                       # (B, m, S, E)
    kx, bkx = repeat_kv_op(k, heads)                          # (B, n, S, E)
    vx, bvx = repeat_kv_op(v, heads)                          # (B, n, S, E)
    A, bA = scores_op(q, kx, scale)                           # (B, n, S, S)
    P, bP = softmax_op(A, causal)                             # (B, n, S, S)
    O, bO = weighted_sum_op(P, vx)                            # (B, n, S, E)
    C, bC = merge_heads_op(O)                                 # (B, S, n·E)
    Y, bY = matmul_op(C, W_o)                                 # (B, S, D)
    values = {"Q": Q, "K": K, "V": V, "scores": A, "probs": P, "context": C, "Y": Y}

    def back(G_Y: np.ndarray) -> dict:
        G_C, G_W_o = bY(G_Y)
        G_P, G_vx = bO(bC(G_C))
        G_A = bP(G_P)
        G_q, G_kx = bA(G_A)
        G_Q, G_K, G_V = bq(G_q), bk(bkx(G_kx)), bv(bvx(G_vx))
        G_X_q, G_W_q = bQ(G_Q)
        G_X_k, G_W_k = bK(G_K)
        G_X_v, G_W_v = bV(G_V)
        return {"G_context": G_C, "G_probs": G_P, "G_scores": G_A, "G_Q": G_Q, "G_K": G_K, "G_V": G_V,
                "G_W_q": G_W_q, "G_W_k": G_W_k, "G_W_v": G_W_v, "G_W_o": G_W_o,
                "G_X": G_X_q + G_X_k + G_X_v}                 # X feeds three projections: gradients add
    return values, back


def softmax_scale(cfg: Config) -> float:
    """1/√E; under ``scale-local-width`` the rank's projection width 1/√(H_r·E) (the mistake)."""
    width = cfg.q_per_rank * cfg.head_dim if cfg.mistake == "scale-local-width" else cfg.head_dim
    return 1.0 / math.sqrt(width)


def reference_attention(inputs: dict, heads: int, kv_heads: int, causal: bool) -> AttentionOutputs:
    """The unsharded computation (one device): Y, loss and the five gradients."""
    X, G = inputs["X"], inputs["G"]
    E = inputs["W_q"].shape[1] // heads
    values, back = attention_forward(X, *(inputs[w] for w in WEIGHTS), heads, kv_heads, 1 / math.sqrt(E), causal)
    grads = back(G)
    return AttentionOutputs(Y=values["Y"], loss=total_fixed(values["Y"] * G), **{k: grads[k] for k in RESULT_KEYS[2:]})


# ---------------------------------------------------------------------- communication

class Operator(NamedTuple):
    """A Megatron operator on a world (one array per rank): what forward and backward do."""

    name: str
    forward: Callable[[list], list]
    backward: Callable[[list], list]


def identity(parts: list) -> list:
    return list(parts)


def all_reduce(parts: list) -> list:
    """AllReduce(SUM): every rank holds the sum, added in rank order."""
    total = reduce_all(parts, "sum")
    return [total for _ in parts]


F_OP = Operator("f", identity, all_reduce)    # before a column-parallel layer
G_OP = Operator("f̄", all_reduce, identity)   # after a row-parallel layer (Korthikanti et al.'s letter)


def tp_operators(mistake: str = "none") -> tuple[Operator, Operator]:
    """(operator entering the parallel region, operator leaving it)."""
    return (G_OP, F_OP) if mistake == "f-and-g-swapped" else (F_OP, G_OP)


def operator_comm(op: Operator, phase_tensors: dict, elements: int, tp: int) -> list[AttentionComm]:
    """The AllReduces operator ``op`` issues, forward and backward (none on a single rank)."""
    out = []
    for phase in ("forward", "backward"):
        if getattr(op, phase) is all_reduce and tp > 1:
            out.append(AttentionComm(phase=phase, collective="all-reduce", operator=op.name,
                                     tensor=phase_tensors[phase], elements=elements, groups=[list(range(tp))]))
    return out


def all_reduce_groups(parts: list, groups: list[list[int]]) -> list:
    """AllReduce(SUM) within each group of ranks (groups partition the ranks)."""
    out = list(parts)
    for grp in groups:
        total = reduce_all([parts[r] for r in grp], "sum")
        for r in grp:
            out[r] = total
    return out


def kv_groups(kv_of_rank: list[list[int]]) -> list[list[int]]:
    """The replica groups: ranks holding the same KV heads, in rank order."""
    groups: dict[tuple, list[int]] = {}
    for r, heads in enumerate(kv_of_rank):
        groups.setdefault(tuple(heads), []).append(r)
    return list(groups.values())


# --------------------------------------------------------------------------- sharding

def shard(inputs: dict, cfg: Config, q_heads: list[int], kv_heads: list[int]) -> dict:
    """Rank's slices: its query heads' columns of W_q / rows of W_o, its KV heads' columns."""
    E = cfg.head_dim
    a, b = q_heads[0] * E, (q_heads[-1] + 1) * E
    c, d = kv_heads[0] * E, (kv_heads[-1] + 1) * E
    return {"W_q": inputs["W_q"][:, a:b],                     # (D, H_r·E) column parallel
            "W_k": inputs["W_k"][:, c:d],                     # (D, K_r·E) column parallel or replicated
            "W_v": inputs["W_v"][:, c:d],                     # (D, K_r·E)
            "W_o": inputs["W_o"][a:b, :]}                     # (H_r·E, D) row parallel


def merge_kv(parts: list[np.ndarray], kv_of_rank: list[list[int]], kv_heads: int, E: int) -> np.ndarray:
    """The full (D, K·E) gradient from the ranks: each KV head's columns from the first rank
    holding it (after the replica AllReduce, every holder has the same)."""
    D = parts[0].shape[0]
    out = np.empty((D, kv_heads * E))
    done = set()
    for part, heads in zip(parts, kv_of_rank):
        for i, k in enumerate(heads):
            if k not in done:
                out[:, k * E:(k + 1) * E] = part[:, i * E:(i + 1) * E]
                done.add(k)
    return out


def spread(parts: list) -> float:
    """max over ranks of |rank's copy − rank 0's copy| (0 for a truly replicated value)."""
    return max(float(np.max(np.abs(np.asarray(p) - np.asarray(parts[0])))) for p in parts)


def kv_replica_spread(parts: list[np.ndarray], kv_of_rank: list[list[int]]) -> float:
    """Largest difference between replicas of the same KV weight gradient."""
    worst = 0.0
    for grp in kv_groups(kv_of_rank):
        worst = max(worst, spread([parts[r] for r in grp]))
    return worst


def sharded_attention(inputs: dict, cfg: Config) -> dict:
    """The tensor-parallel computation: ``ranks`` (records), ``sharded`` (merged), ``comm``,
    ``replica_spread``."""
    tp, X, G = cfg.tp, inputs["X"], inputs["G"]
    B, S, D = X.shape
    enter, leave = tp_operators(cfg.mistake)
    heads = [rank_heads(cfg, r) for r in range(tp)]
    kv_of_rank = [kv for _, kv in heads]
    shards = [shard(inputs, cfg, q, kv) for q, kv in heads]
    scale = softmax_scale(cfg)

    X_in = enter.forward([X] * tp)                            # tp × (B, S, D)
    runs = [attention_forward(X_in[r], *(shards[r][w] for w in WEIGHTS), cfg.q_per_rank, cfg.kv_per_rank,
                              scale, cfg.causal) for r in range(tp)]   # no communication inside
    Y = leave.forward([v["Y"] for v, _ in runs])              # tp × (B, S, D)
    G_Y = leave.backward([G] * tp)                            # tp × (B, S, D) the replicated upstream gradient
    grads = [back(G_Y[r]) for r, (_, back) in enumerate(runs)]
    G_X = enter.backward([g["G_X"] for g in grads])           # tp × (B, S, D)

    groups = kv_groups(kv_of_rank)
    sum_kv = cfg.kv_heads < tp and cfg.mistake != "kv-grad-not-summed"
    reduce_kv = (lambda parts: all_reduce_groups(parts, groups)) if sum_kv else identity
    G_W_k = reduce_kv([g["G_W_k"] for g in grads])            # tp × (D, K_r·E)
    G_W_v = reduce_kv([g["G_W_v"] for g in grads])

    E = cfg.head_dim
    ranks = []
    for r, ((q, kv), (vals, _), g) in enumerate(zip(heads, runs, grads)):
        rec = {"rank": r, "q_heads": q, "kv_heads": kv, **shards[r], "X_in": X_in[r],
               **{k: vals[k] for k in ("Q", "K", "V", "scores", "probs", "context")},
               "Y_partial": vals["Y"], "Y": Y[r], "loss": total_fixed(Y[r] * G), "G_Y": G_Y[r],
               **{k: g[k] for k in ("G_context", "G_probs", "G_scores", "G_Q", "G_K", "G_V", "G_W_q", "G_W_o")},
               "G_W_k_partial": g["G_W_k"], "G_W_v_partial": g["G_W_v"], "G_W_k": G_W_k[r], "G_W_v": G_W_v[r],
               "G_X_partial": g["G_X"], "G_X": G_X[r]}
        rec["shapes"] = {k: list(np.shape(v)) for k, v in rec.items() if isinstance(v, np.ndarray)}
        ranks.append(AttentionRank(**rec))

    merged = AttentionOutputs(
        Y=Y[0], loss=ranks[0].loss, G_X=G_X[0],
        G_W_q=np.concatenate([g["G_W_q"] for g in grads], axis=1),    # (D, H·E)
        G_W_k=merge_kv(G_W_k, kv_of_rank, cfg.kv_heads, E),          # (D, K·E)
        G_W_v=merge_kv(G_W_v, kv_of_rank, cfg.kv_heads, E),
        G_W_o=np.concatenate([g["G_W_o"] for g in grads], axis=0))   # (H·E, D)
    replica_spread = {"Y": spread(Y), "loss": spread([rk.loss for rk in ranks]), "G_X": spread(G_X),
                      "G_W_k": kv_replica_spread(G_W_k, kv_of_rank), "G_W_v": kv_replica_spread(G_W_v, kv_of_rank)}

    comm = operator_comm(leave, {"forward": "Y", "backward": "G_Y"}, B * S * D, tp) \
        + operator_comm(enter, {"forward": "X", "backward": "G_X"}, B * S * D, tp)
    comm.sort(key=lambda c: c.phase != "forward")
    if sum_kv:
        comm += [AttentionComm(phase="backward", collective="all-reduce", operator="kv-replicas", tensor=t,
                               elements=D * cfg.kv_per_rank * E, groups=groups) for t in ("G_W_k", "G_W_v")]
    return {"ranks": ranks, "sharded": merged, "comm": comm, "replica_spread": replica_spread}


def kv_replication_cost(cfg: Config, dtype_bytes: int = 2) -> dict:
    """What replicating KV heads costs each rank, against splitting them evenly (as if that
    were possible): KV weight and KV activation elements/bytes, and the K/V projection FLOPs.

    ``*_unreplicated`` = the whole KV tensor divided by tp (a fraction of a head when K < tp).
    """
    B, S, D, E, tp, Kr = cfg.batch, cfg.seq, cfg.hidden, cfg.head_dim, cfg.tp, cfg.kv_per_rank
    w = 2 * D * Kr * E                        # W_k and W_v shards
    w_even = 2 * D * cfg.kv_heads * E / tp
    act = 2 * B * S * Kr * E                  # K and V activations of this rank
    act_even = 2 * B * S * cfg.kv_heads * E / tp
    flops = 2 * B * S * D * 2 * Kr * E        # X W_k and X W_v, 2 flops per multiply-add
    flops_even = 2 * B * S * D * 2 * cfg.kv_heads * E / tp
    exact = lambda x: int(x) if float(x).is_integer() else x   # noqa: E731  (fractions stay fractions)
    w_even, act_even, flops_even = exact(w_even), exact(act_even), exact(flops_even)
    return {"kv_heads_per_rank": Kr, "replicas": cfg.replicas, "dtype_bytes": dtype_bytes,
            "weight_elements_per_rank": w, "weight_elements_per_rank_unreplicated": w_even,
            "weight_bytes_per_rank": w * dtype_bytes, "weight_bytes_per_rank_unreplicated": w_even * dtype_bytes,
            "activation_elements_per_rank": act, "activation_elements_per_rank_unreplicated": act_even,
            "activation_bytes_per_rank": act * dtype_bytes,
            "activation_bytes_per_rank_unreplicated": act_even * dtype_bytes,
            "kv_projection_flops_per_rank": flops, "kv_projection_flops_per_rank_unreplicated": flops_even,
            "overhead_factor": exact(w / w_even)}


def kv_strategy_cost(cfg: Config) -> dict:
    """Per rank and per layer, the two ways of running K < tp KV heads, in elements and FLOPs.

    ``replicated`` (this module, vLLM's QKVParallelLinear): rank r holds W_q's H_r heads and its
    one KV head whole (D, (H_r + 2K_r)·E); no extra collective forward; in training the replicas'
    K/V weight gradients are summed over each replica group (2 AllReduces of D·K_r·E, once per
    backward pass).  ``megatron`` (Megatron-core's attention.py, get_query_key_value_tensors):
    the fused QKV weight (D, (H + 2K)·E) is split into tp equal column blocks, nothing is
    replicated; when K < tp the fused QKV output (B, S, (H + 2K)·E) is AllGathered in the forward
    pass (its gradient ReduceScattered backward) and each rank keeps its group's columns.  With
    K ≥ tp the two are the same split.  ``*_elements`` of a collective: the size of the whole
    tensor it produces (a ring AllGather receives (tp − 1)/tp of it on each rank).
    """
    B, S, D, E, tp = cfg.batch, cfg.seq, cfg.hidden, cfg.head_dim, cfg.tp
    H, K, Hr, Kr = cfg.heads, cfg.kv_heads, cfg.q_per_rank, cfg.kv_per_rank
    exact = lambda x: int(x) if float(x).is_integer() else x   # noqa: E731
    split = K < tp
    rep = {"qkv_weight_elements": D * (Hr + 2 * Kr) * E,            # (D, (H_r + 2K_r)·E)
           "kv_weight_elements": 2 * D * Kr * E,
           "qkv_flops": 2 * B * S * D * (Hr + 2 * Kr) * E,          # X (B·S, D) @ (D, (H_r + 2K_r)·E)
           "qkv_activation_elements": B * S * (Hr + 2 * Kr) * E,
           "forward_allgather_elements": 0, "backward_reducescatter_elements": 0,
           "kv_grad_allreduce_elements": 2 * D * Kr * E if split else 0}
    meg = {"qkv_weight_elements": exact(D * (H + 2 * K) * E / tp),  # (D, (H + 2K)·E / tp)
           "kv_weight_elements": exact(2 * D * K * E / tp),
           "qkv_flops": exact(2 * B * S * D * (H + 2 * K) * E / tp),
           "qkv_activation_elements": B * S * (H + 2 * K) * E if split else B * S * (Hr + 2 * Kr) * E,
           "forward_allgather_elements": B * S * (H + 2 * K) * E if split else 0,
           "backward_reducescatter_elements": B * S * (H + 2 * K) * E if split else 0,
           "kv_grad_allreduce_elements": 0}
    return {"replicated": rep, "megatron": meg}


QKV_LAYOUTS = ("megatron", "concatenated")


def qkv_blocks(heads: int, kv_heads: int, layout: str) -> list[tuple[str, int]]:
    """The head blocks of a fused QKV weight's output columns, in order, each E columns wide.

    ``megatron``: per KV group g, its H/K query heads then k_g then v_g (Megatron-core's
    linear_qkv: [ng, (np/ng + 2)·hn]); ``concatenated``: [q_0 … q_{H−1} | k_0 … | v_0 …].
    """
    if layout == "concatenated":
        return [("q", h) for h in range(heads)] + [("k", k) for k in range(kv_heads)] + \
            [("v", k) for k in range(kv_heads)]
    per = heads // kv_heads
    return [blk for g in range(kv_heads) for blk in [("q", g * per + i) for i in range(per)] + [("k", g), ("v", g)]]


def fused_qkv_split(tp: Any = 2, heads: Any = 4, kv_heads: Any = None, head_dim: Any = 1,
                    layout: Any = "megatron") -> dict:
    """What each rank gets when a fused QKV weight (D, (H + 2K)·E) is split into tp equal
    column blocks, as ColumnParallelLinear splits it: per rank the pieces of head blocks it holds
    (``{"part": q|k|v, "head", "cols": [a, b)}`` within the head's E columns) and whether they
    are exactly the whole query heads of :func:`rank_heads` and the whole KV heads those read
    (``usable``: the rank can run attention without any communication)."""
    E = as_int("head_dim", head_dim, 1, MAX_HIDDEN)
    cfg = validate_config(tp, heads, kv_heads, hidden=as_int("heads", heads, 1, MAX_HEADS) * E)
    layout = as_choice("layout", layout, QKV_LAYOUTS)
    blocks = qkv_blocks(cfg.heads, cfg.kv_heads, layout)
    total = len(blocks) * E
    if total % cfg.tp:
        return {"layout": layout, "columns": total, "columns_per_rank": total / cfg.tp, "ranks": None}
    width = total // cfg.tp
    ranks = []
    for r in range(cfg.tp):
        lo, hi = r * width, (r + 1) * width
        pieces = [{"part": part, "head": h, "cols": [max(lo, i * E) - i * E, min(hi, (i + 1) * E) - i * E]}
                  for i, (part, h) in enumerate(blocks) if i * E < hi and (i + 1) * E > lo]
        q, kv = rank_heads(cfg, r)
        whole = sorted((p["part"], p["head"]) for p in pieces if p["cols"] == [0, E])
        needed = sorted([("q", h) for h in q] + [(x, k) for k in kv for x in "kv"])
        ranks.append({"rank": r, "pieces": pieces, "usable": len(whole) == len(pieces) and whole == needed})
    return {"layout": layout, "columns": total, "columns_per_rank": width, "ranks": ranks}


def max_abs(a: Any, b: Any) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def compare(sharded: Any, reference: Any) -> dict:
    """max |sharded − reference| per field of ``reference`` (a record of outputs), the tolerances
    and whether all are within them."""
    ref = fields_of(reference)
    errs = {k: max_abs(getattr(sharded, k), v) for k, v in ref.items()}
    tols = {k: REL_TOL * max(1.0, float(np.max(np.abs(v)))) for k, v in ref.items()}
    return {"max_abs_err": errs, "tolerances": tols, "matches_reference": all(errs[k] <= tols[k] for k in errs)}


def run_attention(tp: Any = 2, heads: Any = 4, kv_heads: Any = None, seq: Any = 4, batch: Any = 1,
                  hidden: Any = 8, seed: Any = 0, causal: Any = False, mistake: Any = "none",
                  dtype_bytes: Any = 2) -> AttentionResult:
    """Attention sharded over tp ranks next to its unsharded reference (float64): an
    :class:`AttentionResult` (``replica_spread``: how far the copies of replicated values differ
    between ranks; ``kv_replication``: what replicating KV heads costs).
    """
    cfg = validate_config(tp, heads, kv_heads, seq, batch, hidden, causal, mistake)
    seed = as_int("seed", seed, 0, MAX_SEED)
    dtype_bytes = as_int("dtype_bytes", dtype_bytes, 1, 8)
    inputs = example_inputs(seed, cfg)
    reference = reference_attention(inputs, cfg.heads, cfg.kv_heads, cfg.causal)
    tp_run = sharded_attention(inputs, cfg)
    return AttentionResult(
        config={"tp": cfg.tp, "heads": cfg.heads, "kv_heads": cfg.kv_heads, "head_dim": cfg.head_dim,
                "seq": cfg.seq, "batch": cfg.batch, "hidden": cfg.hidden, "causal": cfg.causal,
                "mistake": cfg.mistake, "seed": seed, "scale": softmax_scale(cfg)},
        inputs=inputs, reference=reference, sharded=tp_run["sharded"], **compare(tp_run["sharded"], reference),
        ranks=tp_run["ranks"], comm=tp_run["comm"], replica_spread=tp_run["replica_spread"],
        kv_replication=kv_replication_cost(cfg, dtype_bytes))


@functools.lru_cache(maxsize=32)
def _cached(cfg: Config, seed: int) -> AttentionResult:
    return run_attention(cfg.tp, cfg.heads, cfg.kv_heads, cfg.seq, cfg.batch, cfg.hidden, seed, cfg.causal,
                         cfg.mistake)


def cached_run(tp: Any = 2, heads: Any = 4, kv_heads: Any = None, seq: Any = 4, batch: Any = 1, hidden: Any = 8,
               seed: Any = 0, causal: Any = False, mistake: Any = "none") -> AttentionResult:
    """:func:`run_attention` memoised per validated configuration: a page section and its
    real-ranks block show the same run.  The result is shared: callers must not modify it."""
    cfg = validate_config(tp, heads, kv_heads, seq, batch, hidden, causal, mistake)
    return _cached(cfg, as_int("seed", seed, 0, MAX_SEED))
