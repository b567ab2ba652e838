"""Sequence parallelism (Korthikanti et al. 2022, §4.2.2) on the pre-LN MLP sub-block.

Letters
-------
B  batch            S  sequence length     D  hidden size        F  MLP width (ffn)
T  tp, the tensor-parallel size; T divides S and F     Sl = S/T tokens per rank     r  a rank

The block, one device, in Megatron's orientation ``Y = X A``::

    A  = LN(X)            (B, S, D)   over D, with γ, β (D,), ε = 1e-5
    Z  = A W1             (B, S, F)   W1 (D, F): column parallel
    H  = tanh(Z)          (B, S, F)
    Hd = drop_tp(H)       (B, S, F)   dropout inside the TP region (off by default)
    O  = Hd W2            (B, S, D)   W2 (F, D): row parallel
    Od = drop_sp(O)       (B, S, D)   Megatron's hidden dropout, in the sequence-parallel region
    Y  = X + Od           (B, S, D)   residual
    L  = Σ Y ⊙ G                      so dL/dY = G

With tensor + sequence parallelism rank r holds the tokens [r·Sl, (r+1)·Sl) of X, Y and every
tensor outside the TP region, the columns [r·F/T, (r+1)·F/T) of W1 and the same rows of W2.
The conjugate operators (Korthikanti et al. 2022, Fig. 5 and 6; Megatron-core
``tensor_parallel/mappings.py``):

    g  forward  AllGather along the sequence (LN(X) shards → full LN(X) before W1)
       backward ReduceScatter along the sequence (partial dL/dA → this rank's tokens)
       (``_GatherFromSequenceParallelRegion``)
    ḡ  forward  ReduceScatter along the sequence (partial O → this rank's tokens of O)
       backward AllGather along the sequence (dL/dO shards → full dL/dO for W2)
       (``_ReduceScatterToSequenceParallelRegion``)

γ and β are replicated but each rank differentiates LN on its own tokens only, so its γ/β
gradients are partial sums: an AllReduce(SUM) over the TP group completes them (Megatron-core
``finalize_model_grads._allreduce_layernorm_grads``, for parameters marked ``sequence_parallel``).
Plain TP (for the byte comparison) replaces g/ḡ with f (identity / AllReduce backward) and
f̄ (AllReduce / identity backward) and runs LN, dropout and the residual on every rank in full.

Dropout masks come from a counter-based generator (SplitMix64 of key and counter, in the
spirit of the Philox (seed, offset) generator of cuRAND and PyTorch): a mask entry is a pure
function of (key, counter), so any shard can be drawn on its own.  One dropout stream per run,
key = seed + 2718 (Megatron's model-parallel seed offset); the H dropout draws counters
[0, B·S·F) in (f, b, s) order, the O dropout the next B·S·D in (s, b, d) order (Megatron's
[s, b, h]), so each rank's block of either tensor is one contiguous counter range.  A rank
that starts its stream at its block's offset reproduces the one-device mask exactly: that is
this page's "model-parallel" RNG state.  Megatron's own tracker gives each TP rank a
different *seed* instead (seed + 2718 + rank, ``model_parallel_cuda_manual_seed``), and forks
it for the whole layer when sequence parallelism is on (``transformer_block.py``): different
masks per shard, the right distribution, but not the bits of a one-device run.  The mistake is
the *default* state — identical on every TP rank — in a region whose shards differ: every
rank then draws the same mask for its own block.

What the column-parallel linear keeps for its weight gradient (``backward_input``): Megatron-core's
``LinearWithGradAccumulationAndAsyncCommunication`` saves only the sequence shard A_r of its input
and, with sequence parallelism, all-gathers A again in the backward pass before the weight-gradient
GEMM, overlapped with the input-gradient GEMM (``"regather"``, the default: one more AllGather per
block, five collectives of half an AllReduce instead of four).  ``"keep"`` stores the gathered A
(B·S·D instead of B·Sl·D elements per rank) and sends exactly the bytes of plain TP.

Mistakes computed on purpose (``mistake``): ``ln-grad-not-reduced`` (γ/β gradients left
partial), ``same-dropout-seed`` (every rank starts the dropout stream at offset 0; needs
dropout > 0, default :data:`DEMO_DROPOUT`), ``gather-wrong-dim`` (g concatenates the shards
along the hidden dimension and the result is viewed as (B, S, D), with the matching backward).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .collectives import REGISTRY, reduce_all
from .errors import TPMathError
from .kernels import matmul_fixed as mm, tanh_fixed, total_fixed  # same bits in CPython and Pyodide
from .validate import as_choice, as_float, as_int, check_divides
from .i18n import option

EPS = 1e-5
MAX_TP = 16
MAX_SEQ = 64
MAX_BATCH = 8
MAX_HIDDEN = 64
MAX_FFN = 256
MAX_DROPOUT = 0.9
MISTAKES = ("none", "ln-grad-not-reduced", "same-dropout-seed", "gather-wrong-dim")
BACKWARD_INPUTS = ("regather", "keep")   # Megatron re-gathers the linear's input in backward / keeps it
DEMO_DROPOUT = 0.25          # the dropout probability of the RNG demo when none is given
MP_SEED_OFFSET = 2718        # Megatron's model_parallel_cuda_manual_seed: seed + 2718 (+ tp rank)
RESULT_KEYS = ("Y", "loss", "G_X", "G_gamma", "G_beta", "G_W1", "G_W2")
REL_TOL = 1e-12              # sharding only reorders float64 sums: allowed |Δ| / max(1, |reference|)


# -------------------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class SpOutputs:
    """Y, the loss and the gradients at full shapes: one device, or assembled from the ranks
    (γ/β: what rank 0 would step with)."""
    Y: np.ndarray                   # (B, S, D)
    loss: float
    G_X: np.ndarray                 # (B, S, D)
    G_gamma: np.ndarray             # (D,)
    G_beta: np.ndarray              # (D,)
    G_W1: np.ndarray                # (D, F)
    G_W2: np.ndarray                # (F, D)


@dataclass(frozen=True, eq=False)
class SpComm:
    """One collective of the block: phase, collective, the full tensor's elements (B·S·D, or 2D
    for the γ/β AllReduce), the operator that issues it and the tensor's name."""
    phase: str                      # forward / backward
    collective: str                 # all-gather, reduce-scatter, all-reduce
    elements: int
    operator: str                   # g, ḡ, f, f̄, LN
    tensor: str                     # LN(X) (again, in backward: the re-gather), O, G_O, G_A, G_gamma, G_beta


@dataclass(frozen=True, eq=False)
class SpRng:
    """Where a rank starts its dropout stream (module doc): the generator's key and the counter
    offsets of its H and O mask blocks; ``state`` = model-parallel, or default (the mistake)."""
    state: str
    key: int
    tp_offset: int
    sp_offset: int


@dataclass(frozen=True, eq=False)
class SpRank:
    """What rank ``rank`` holds and computes with TP + SP: its tokens and MLP columns, its masks,
    the forward, then the backward; ``shapes`` = the shape of every array field but the masks."""
    rank: int
    seq_range: list[int]            # [r·Sl, (r+1)·Sl): its tokens
    ffn_range: list[int]            # [r·F/T, (r+1)·F/T): its columns of W1, rows of W2
    rng: SpRng
    X: np.ndarray                   # (B, Sl, D)   sequence shard
    G_Y: np.ndarray                 # (B, Sl, D)   dL/dY of its tokens
    W1: np.ndarray                  # (D, F/T)     column parallel
    W2: np.ndarray                  # (F/T, D)     row parallel
    keep_H: np.ndarray | None       # (B, S, F/T)  keep-mask of its H block; None: dropout off
    keep_O: np.ndarray | None       # (B, Sl, D)   keep-mask of its O tokens
    A: np.ndarray                   # (B, Sl, D)   LN on its own tokens only
    mean: np.ndarray                # (B, Sl)
    rstd: np.ndarray                # (B, Sl)
    A_full: np.ndarray              # (B, S, D)    after g's AllGather
    Z: np.ndarray                   # (B, S, F/T)
    H: np.ndarray                   # (B, S, F/T)
    Hd: np.ndarray                  # (B, S, F/T)  after the H dropout
    O_partial: np.ndarray           # (B, S, D)    a partial sum over its columns
    O: np.ndarray                   # (B, Sl, D)   after ḡ's ReduceScatter
    Y: np.ndarray                   # (B, Sl, D)
    loss_partial: float             # Σ Y ⊙ G over its tokens
    G_O_full: np.ndarray            # (B, S, D)    after ḡ's backward AllGather
    G_Hd: np.ndarray                # (B, S, F/T)
    G_H: np.ndarray                 # (B, S, F/T)
    G_Z: np.ndarray                 # (B, S, F/T)
    G_W1: np.ndarray                # (D, F/T)     complete locally
    G_W2: np.ndarray                # (F/T, D)     complete locally
    G_A_partial: np.ndarray         # (B, S, D)    a partial sum over its columns
    G_A: np.ndarray                 # (B, Sl, D)   after g's backward ReduceScatter
    G_gamma_partial: np.ndarray     # (D,)         from its own tokens only
    G_beta_partial: np.ndarray      # (D,)
    G_X: np.ndarray                 # (B, Sl, D)
    G_gamma: np.ndarray             # (D,)         after the AllReduce over TP (the partial under the mistake)
    G_beta: np.ndarray              # (D,)
    shapes: dict[str, list[int]]    # field -> shape, for every array field above but keep_H, keep_O


@dataclass(frozen=True, eq=False)
class SpPlainTp:
    """The same block with plain TP (LN, dropout on O and the residual on every rank, f / f̄):
    its outputs, collectives, errors against the one-device block and per-rank traffic."""
    Y: np.ndarray                   # (B, S, D)
    loss: float
    G_X: np.ndarray                 # (B, S, D)
    G_gamma: np.ndarray             # (D,)
    G_beta: np.ndarray              # (D,)
    G_W1: np.ndarray                # (D, F)
    G_W2: np.ndarray                # (F, D)
    comm: list[SpComm]
    max_abs_err: dict[str, float]   # per :data:`RESULT_KEYS`
    comm_per_rank: dict[str, float]  # block, ln_grads, total (:func:`comm_totals`)


@dataclass(frozen=True, eq=False)
class SpLayerResult:
    """The block with TP + SP next to the one-device reference and plain TP (:func:`run_sp_layer`);
    the options first, as validated."""
    tp: int
    seq: int
    batch: int
    hidden: int
    ffn: int
    seed: int
    mistake: str
    dropout: float
    backward_input: str             # BACKWARD_INPUTS: re-gather A in backward (Megatron) or keep it
    eps: float
    inputs: dict[str, np.ndarray]   # X (B, S, D), gamma beta (D,), W1 (D, F), W2 (F, D), G (B, S, D)
    reference: SpOutputs
    sharded: SpOutputs
    max_abs_err: dict[str, float]   # per :data:`RESULT_KEYS`
    tolerances: dict[str, float]
    within_tolerance: bool
    ln_grads_agree: bool            # every rank steps with the same γ/β gradients
    ranks: list[SpRank]             # one per rank, in rank order
    comm: list[SpComm]
    comm_per_rank: dict[str, float]  # block, ln_grads, total (:func:`comm_totals`)
    plain_tp: SpPlainTp


# ----------------------------------------------------------------------------- validation

def validate_options(tp: Any = 2, seq: Any = 4, batch: Any = 2, hidden: Any = 4, ffn: Any = 8, seed: Any = 0,
                     mistake: Any = "none", dropout: Any = None, backward_input: Any = "regather") -> dict:
    """Every option checked once, by name; the one place this module raises."""
    o = {"tp": as_int("tp", tp, 1, MAX_TP), "seq": as_int("seq", seq, 1, MAX_SEQ),
         "batch": as_int("batch", batch, 1, MAX_BATCH), "hidden": as_int("hidden", hidden, 2, MAX_HIDDEN),
         "ffn": as_int("ffn", ffn, 1, MAX_FFN), "seed": as_int("seed", seed, 0, 2**32 - 1),
         "mistake": as_choice("mistake", mistake, MISTAKES)}
    check_divides(o["tp"], o["seq"], "tp", "seq")     # equal sequence shards
    check_divides(o["tp"], o["ffn"], "tp", "ffn")     # equal column / row shards of W1 / W2
    if dropout is None:
        o["dropout"] = DEMO_DROPOUT if o["mistake"] == "same-dropout-seed" else 0.0
    else:
        o["dropout"] = as_float("dropout", dropout, 0.0, MAX_DROPOUT)
    if o["mistake"] == "same-dropout-seed" and o["dropout"] == 0.0:
        raise TPMathError("sp_dropout_needed", "dropout", mistake=option("mistake", "same-dropout-seed"))
    o["backward_input"] = as_choice("backward_input", backward_input, BACKWARD_INPUTS)
    return o


def make_inputs(seed: int, batch: int, seq: int, hidden: int, ffn: int) -> dict[str, np.ndarray]:
    """Deterministic float64 inputs from ``numpy.random.default_rng(seed)``; weights scaled by
    1/sqrt(fan-in) so tanh is not saturated, γ near 1 and β near 0 but neither trivial."""
    rng = np.random.default_rng(seed)
    B, S, D, F = batch, seq, hidden, ffn
    return {
        "X": rng.standard_normal((B, S, D)),
        "gamma": 1.0 + 0.25 * rng.standard_normal(D),
        "beta": 0.25 * rng.standard_normal(D),
        "W1": rng.standard_normal((D, F)) / math.sqrt(D),
        "W2": rng.standard_normal((F, D)) / math.sqrt(F),
        "G": rng.standard_normal((B, S, D)),
    }


# -------------------------------------------------------- counter-based dropout masks

_MASK64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def uniforms(key: int, counters: np.ndarray) -> np.ndarray:
    """U[0, 1) numbers, one per counter: SplitMix64's finaliser of (key, counter).

    A pure function of (key, counter): a shard is drawn by passing its own counters, with no
    state shared between ranks.  uint64 arithmetic wraps modulo 2**64 by design.
    """
    base = np.uint64((key * 0xD1B54A32D192ED03) & _MASK64)
    z = np.asarray(counters, dtype=np.uint64) * _GOLDEN + base
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def counter_grid(shape: tuple[int, ...], major: int) -> np.ndarray:
    """Counters 0 … n−1 laid over ``shape``, axis ``major`` slowest, the others in order: a block
    of ``shape`` along ``major`` is then one contiguous counter range."""
    order = (major,) + tuple(a for a in range(len(shape)) if a != major)
    grid = np.arange(math.prod(shape), dtype=np.uint64).reshape([shape[a] for a in order])
    return grid.transpose(np.argsort(order))


def keep_mask(key: int, offset: int, shape: tuple[int, ...], major: int, p: float) -> np.ndarray | None:
    """Boolean keep-mask (True = kept) of one dropout call; None when p = 0 (dropout off)."""
    if p == 0.0:
        return None
    return uniforms(key, counter_grid(shape, major) + np.uint64(offset)) >= p


DROPOUT_SEEDS = ("same", "rank-offset")    # Megatron's default state / its model-parallel state


def rank_dropout_masks(tp: Any, seq: Any, hidden: Any, p: Any, seed: Any, scheme: Any,
                       sharded: bool) -> list[np.ndarray]:
    """Each TP rank's keep-mask (True: kept) of one dropout call on a (seq, hidden) activation, or
    on its token shard (seq/tp rows) if ``sharded``, every rank starting its stream at counter 0:
    ``same`` seeds every rank alike (Megatron's default state, key ``seed``), ``rank-offset`` as
    ``model_parallel_cuda_manual_seed`` seeds the model-parallel state (``seed`` + 2718 + rank)."""
    t, s, d = as_int("tp", tp, 1, MAX_TP), as_int("seq", seq, 1, MAX_SEQ), as_int("hidden", hidden, 1, MAX_HIDDEN)
    q, base = as_float("dropout", p, 0.0, MAX_DROPOUT), as_int("seed", seed, 0, 2**32 - 1)
    offset = as_choice("scheme", scheme, DROPOUT_SEEDS) == "rank-offset"
    check_divides(t, s, "tp", "seq")
    rows = s // t if sharded else s
    return [keep_mask(base + (MP_SEED_OFFSET + r if offset else 0), 0, (rows, d), 0, q) for r in range(t)]


def apply_dropout(x: np.ndarray, keep: np.ndarray | None, p: float) -> np.ndarray:
    """Inverted dropout: kept entries scaled by 1/(1 − p), the others 0 (identity when off).
    The backward is the same map applied to the incoming gradient."""
    return x if keep is None else x * keep / (1.0 - p)


# ---------------------------------------------------------- ops: forward next to backward

def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, dict]:
    """y = γ ⊙ (x − μ)/sqrt(σ² + ε) + β over the last axis; keeps x̂ and 1/σ for the backward."""
    mu = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + EPS)
    xhat = (x - mu) * rstd
    return gamma * xhat + beta, {"xhat": xhat, "mean": mu[..., 0], "rstd": rstd[..., 0]}


def layer_norm_backward(gy: np.ndarray, cache: dict, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dL/dx, dL/dγ, dL/dβ).  dL/dγ = Σ gy ⊙ x̂ and dL/dβ = Σ gy sum over the tokens *this call
    saw*: on a sequence shard they are partial sums."""
    xhat, rstd = cache["xhat"], cache["rstd"][..., None]
    gxhat = gy * gamma
    gx = rstd * (gxhat - gxhat.mean(axis=-1, keepdims=True) - xhat * (gxhat * xhat).mean(axis=-1, keepdims=True))
    lead = tuple(range(gy.ndim - 1))
    return gx, (gy * xhat).sum(axis=lead), gy.sum(axis=lead)


def _tokens(x: np.ndarray) -> np.ndarray:
    """(B, S, n) as (B·S, n): a weight gradient sums over every token of every sequence."""
    return x.reshape(-1, x.shape[-1])


def mlp_forward(A: np.ndarray, W1: np.ndarray, W2: np.ndarray, keep_h: np.ndarray | None, p: float) -> dict:
    """The TP region on one rank (or on one device with the full weights)."""
    Z = mm(A, W1)                   # (B, S, F/T)  column parallel: every token, own columns
    H = tanh_fixed(Z)               # (B, S, F/T)  elementwise: stays local
    Hd = apply_dropout(H, keep_h, p)
    O = mm(Hd, W2)                  # (B, S, D)    row parallel: partial sum over own F/T
    return {"Z": Z, "H": H, "Hd": Hd, "O_partial": O}


def mlp_backward(A: np.ndarray, W1: np.ndarray, W2: np.ndarray, fwd: dict, G_O: np.ndarray,
                 keep_h: np.ndarray | None, p: float) -> dict:
    """Backward of :func:`mlp_forward` from the full dL/dO (B, S, D)."""
    G_Hd = mm(G_O, W2.T)                                # (B, S, F/T)
    G_W2 = mm(_tokens(fwd["Hd"]).T, _tokens(G_O))   # (F/T, D) own rows, complete locally
    G_H = apply_dropout(G_Hd, keep_h, p)                # same mask, same scale
    G_Z = G_H * (1.0 - fwd["H"] ** 2)                   # tanh' = 1 − H²
    G_W1 = mm(_tokens(A).T, _tokens(G_Z))           # (D, F/T) own columns, complete locally
    G_A = mm(G_Z, W1.T)                                 # (B, S, D) partial: a sum over ranks completes it
    return {"G_Hd": G_Hd, "G_H": G_H, "G_Z": G_Z, "G_W1": G_W1, "G_W2": G_W2, "G_A_partial": G_A}


# ------------------------------------------------------- collectives along the sequence
# A (B, Sl, D) shard is the same memory as Megatron's (Sl, B, D) only after a transpose:
# all_gather_into_tensor / reduce_scatter_tensor split dim 0, which is why Megatron keeps
# activations as [s, b, h].  Here the rank blocks are placed along axis 1 directly.

def all_gather_seq(shards: list[np.ndarray]) -> np.ndarray:
    """AllGather along the sequence: rank i's tokens land at [i·Sl, (i+1)·Sl)."""
    return np.concatenate(shards, axis=1)               # (B, S, D)


def reduce_scatter_seq(partials: list[np.ndarray]) -> list[np.ndarray]:
    """ReduceScatter(SUM) along the sequence: rank i keeps tokens [i·Sl, (i+1)·Sl) of the sum."""
    total = reduce_all(partials, "sum")                 # (B, S, D), ranks added in order
    return np.split(total, len(partials), axis=1)       # T × (B, Sl, D)


def all_gather_hidden_viewed(shards: list[np.ndarray]) -> np.ndarray:
    """The gather-wrong-dim mistake: concatenate along D, then view as (B, S, D)."""
    B, Sl, D = shards[0].shape
    return np.concatenate(shards, axis=2).reshape(B, Sl * len(shards), D)


def reduce_scatter_hidden_viewed(partials: list[np.ndarray]) -> list[np.ndarray]:
    """The adjoint of :func:`all_gather_hidden_viewed` (what autograd would run backward)."""
    T = len(partials)
    B, S, D = partials[0].shape
    total = reduce_all(partials, "sum").reshape(B, S // T, T * D)
    return np.split(total, T, axis=2)


# ---------------------------------------------------------------------------- the block

def reference_block(inp: dict, masks: dict, p: float) -> SpOutputs:
    """One device: forward, loss, and the hand-written backward."""
    X, gamma, beta, W1, W2, G = (inp[k] for k in ("X", "gamma", "beta", "W1", "W2", "G"))
    A, ln = layer_norm(X, gamma, beta)                                  # (B, S, D)
    f = mlp_forward(A, W1, W2, masks["H"], p)
    Y = X + apply_dropout(f["O_partial"], masks["O"], p)                # (B, S, D)
    b = mlp_backward(A, W1, W2, f, apply_dropout(G, masks["O"], p), masks["H"], p)
    G_X_ln, G_gamma, G_beta = layer_norm_backward(b["G_A_partial"], ln, gamma)
    return SpOutputs(Y=Y, loss=float(total_fixed(Y * G)), G_X=G + G_X_ln, G_gamma=G_gamma, G_beta=G_beta,
                     G_W1=b["G_W1"], G_W2=b["G_W2"])


def _rng_offsets(o: dict, r: int) -> SpRng:
    """Where rank r starts its dropout stream for the H and the O dropout (see module doc)."""
    B, S, D, F, T = o["batch"], o["seq"], o["hidden"], o["ffn"], o["tp"]
    h_local, o_local = B * S * (F // T), B * (S // T) * D
    if o["mistake"] == "same-dropout-seed":        # default state: identical on every rank
        return SpRng(state="default", key=o["seed"] + MP_SEED_OFFSET, tp_offset=0, sp_offset=h_local)
    return SpRng(state="model-parallel", key=o["seed"] + MP_SEED_OFFSET,
                 tp_offset=r * h_local, sp_offset=B * S * F + r * o_local)


def reference_masks(o: dict) -> dict:
    """The one-device masks: H over counters [0, B·S·F), O over the next B·S·D."""
    B, S, D, F, p = o["batch"], o["seq"], o["hidden"], o["ffn"], o["dropout"]
    key = o["seed"] + MP_SEED_OFFSET
    return {"H": keep_mask(key, 0, (B, S, F), 2, p), "O": keep_mask(key, B * S * F, (B, S, D), 1, p)}


def sharded_block(inp: dict, o: dict) -> tuple[list[SpRank], SpOutputs, list[SpComm]]:
    """TP + SP, one record per rank (each sees only its shards), the assembled results, and comm."""
    X, gamma, beta, W1, W2, G = (inp[k] for k in ("X", "gamma", "beta", "W1", "W2", "G"))
    T, p, mistake = o["tp"], o["dropout"], o["mistake"]
    B, S, D = X.shape
    Sl, Fl = S // T, W1.shape[1] // T
    wrong = mistake == "gather-wrong-dim"
    gather = all_gather_hidden_viewed if wrong else all_gather_seq
    rs_input_grad = reduce_scatter_hidden_viewed if wrong else reduce_scatter_seq
    ranks = []
    for r in range(T):
        rng = _rng_offsets(o, r)
        ranks.append({
            "rank": r, "seq_range": [r * Sl, (r + 1) * Sl], "ffn_range": [r * Fl, (r + 1) * Fl], "rng": rng,
            "X": X[:, r * Sl:(r + 1) * Sl],                             # (B, Sl, D) sequence shard
            "G_Y": G[:, r * Sl:(r + 1) * Sl],                           # (B, Sl, D) dL/dY of own tokens
            "W1": W1[:, r * Fl:(r + 1) * Fl],                           # (D, F/T) columns
            "W2": W2[r * Fl:(r + 1) * Fl, :],                           # (F/T, D) rows
            "keep_H": keep_mask(rng.key, rng.tp_offset, (B, S, Fl), 2, p),          # (B, S, F/T)
            "keep_O": keep_mask(rng.key, rng.sp_offset, (B, Sl, D), 1, p),          # (B, Sl, D)
        })
    # ---- forward (each rank's values gathered by name, then frozen into its record)
    caches = []
    for rk in ranks:
        rk["A"], cache = layer_norm(rk["X"], gamma, beta)               # (B, Sl, D) LN on own tokens only
        rk["mean"], rk["rstd"] = cache["mean"], cache["rstd"]           # (B, Sl) each
        caches.append(cache)
    A_full = gather([rk["A"] for rk in ranks])                          # (B, S, D)  g: AllGather
    for rk in ranks:
        rk["A_full"] = A_full
        rk.update(mlp_forward(A_full, rk["W1"], rk["W2"], rk["keep_H"], p))   # Z, H, Hd (B,S,F/T); O_partial (B,S,D)
    for rk, O in zip(ranks, reduce_scatter_seq([rk["O_partial"] for rk in ranks])):   # ḡ: ReduceScatter
        rk["O"] = O                                                     # (B, Sl, D)
        rk["Y"] = rk["X"] + apply_dropout(O, rk["keep_O"], p)           # (B, Sl, D) dropout + residual, local
        rk["loss_partial"] = float(total_fixed(rk["Y"] * rk["G_Y"]))
    # ---- backward (the collectives swap: ḡ's backward gathers, g's backward reduce-scatters)
    G_O_full = all_gather_seq([apply_dropout(rk["G_Y"], rk["keep_O"], p) for rk in ranks])   # (B, S, D) ḡ'
    if o["backward_input"] == "regather":     # Megatron kept only A_r: gather it again for G_W1
        A_full = gather([rk["A"] for rk in ranks])                      # (B, S, D) the same AllGather as g
    for rk in ranks:
        rk["G_O_full"] = G_O_full
        rk.update(mlp_backward(A_full, rk["W1"], rk["W2"], rk, G_O_full, rk["keep_H"], p))
    for rk, cache, G_A in zip(ranks, caches, rs_input_grad([rk["G_A_partial"] for rk in ranks])):   # g'
        rk["G_A"] = G_A                                                 # (B, Sl, D)
        G_X_ln, rk["G_gamma_partial"], rk["G_beta_partial"] = layer_norm_backward(G_A, cache, gamma)   # (D,) partial
        rk["G_X"] = rk["G_Y"] + G_X_ln                                  # (B, Sl, D) residual + LN path
    if mistake == "ln-grad-not-reduced":
        for rk in ranks:                                                # each rank keeps its own partial sum
            rk["G_gamma"], rk["G_beta"] = rk["G_gamma_partial"], rk["G_beta_partial"]
    else:
        G_gamma = reduce_all([rk["G_gamma_partial"] for rk in ranks], "sum")    # (D,) AllReduce over TP
        G_beta = reduce_all([rk["G_beta_partial"] for rk in ranks], "sum")
        for rk in ranks:
            rk["G_gamma"], rk["G_beta"] = G_gamma, G_beta
    assembled = SpOutputs(
        Y=np.concatenate([rk["Y"] for rk in ranks], axis=1),             # (B, S, D) only to compare
        # in rank order, one add at a time: Python 3.12's sum() (Pyodide) compensates float sums, 3.11's does not
        loss=float(total_fixed(np.array([rk["loss_partial"] for rk in ranks]))),
        G_X=np.concatenate([rk["G_X"] for rk in ranks], axis=1),
        G_gamma=ranks[0]["G_gamma"], G_beta=ranks[0]["G_beta"],          # what rank 0 would step with
        G_W1=np.concatenate([rk["G_W1"] for rk in ranks], axis=1),       # (D, F)
        G_W2=np.concatenate([rk["G_W2"] for rk in ranks], axis=0),       # (F, D)
    )
    records = [SpRank(**rk, shapes={k: list(np.shape(v)) for k, v in rk.items()
                                    if isinstance(v, np.ndarray) and k not in ("keep_H", "keep_O")})
               for rk in ranks]
    return records, assembled, sp_comm(B, S, D, mistake, o["backward_input"])


def sp_comm(B: int, S: int, D: int, mistake: str = "none", backward_input: str = "regather") -> list[SpComm]:
    """The collectives of one TP + SP block, in the order they are issued; ``elements`` = the full
    (B, S, D) tensor (B·S·D).  The re-gather of A runs before g's backward ReduceScatter (Megatron
    starts it before the input-gradient GEMM and waits for it before the weight-gradient GEMM)."""
    n = B * S * D
    comm = [
        SpComm(phase="forward", collective="all-gather", elements=n, operator="g", tensor="LN(X)"),
        SpComm(phase="forward", collective="reduce-scatter", elements=n, operator="ḡ", tensor="O"),
        SpComm(phase="backward", collective="all-gather", elements=n, operator="ḡ", tensor="G_O"),
    ]
    if backward_input == "regather":
        comm.append(SpComm(phase="backward", collective="all-gather", elements=n, operator="g",
                           tensor="LN(X) again"))
    comm.append(SpComm(phase="backward", collective="reduce-scatter", elements=n, operator="g", tensor="G_A"))
    if mistake != "ln-grad-not-reduced":
        comm.append(SpComm(phase="backward", collective="all-reduce", elements=2 * D, operator="LN",
                           tensor="G_gamma, G_beta"))
    return comm


def plain_tp_block(inp: dict, o: dict, masks: dict) -> dict:
    """The same block with plain TP: X, LN, dropout on O and the residual replicated on every rank.

    The O dropout is in the replicated region, so every rank must draw the *same* mask (the
    default RNG state); the H dropout is in the TP region (per-rank blocks, as with SP).
    Returns the fields of :class:`SpOutputs` and ``comm`` by name.
    """
    X, gamma, beta, W1, W2, G = (inp[k] for k in ("X", "gamma", "beta", "W1", "W2", "G"))
    T, p = o["tp"], o["dropout"]
    B, S, D = X.shape
    Fl = W1.shape[1] // T
    A, ln = layer_norm(X, gamma, beta)                                  # (B, S, D) same on every rank
    per = []
    for r in range(T):
        W1_r, W2_r = W1[:, r * Fl:(r + 1) * Fl], W2[r * Fl:(r + 1) * Fl, :]
        keep_h = None if masks["H"] is None else masks["H"][:, :, r * Fl:(r + 1) * Fl]
        per.append((W1_r, W2_r, keep_h, mlp_forward(A, W1_r, W2_r, keep_h, p)))
    O = reduce_all([f["O_partial"] for *_, f in per], "sum")           # (B, S, D) f̄: AllReduce
    Y = X + apply_dropout(O, masks["O"], p)                             # same mask on every rank
    G_O = apply_dropout(G, masks["O"], p)
    bw = [mlp_backward(A, W1_r, W2_r, f, G_O, k, p) for W1_r, W2_r, k, f in per]
    G_A = reduce_all([b["G_A_partial"] for b in bw], "sum")            # (B, S, D) f: AllReduce backward
    G_X_ln, G_gamma, G_beta = layer_norm_backward(G_A, ln, gamma)      # full on every rank: no reduce
    n = B * S * D
    return {
        "Y": Y, "loss": float(total_fixed(Y * G)), "G_X": G + G_X_ln, "G_gamma": G_gamma, "G_beta": G_beta,
        "G_W1": np.concatenate([b["G_W1"] for b in bw], axis=1), "G_W2": np.concatenate([b["G_W2"] for b in bw]),
        "comm": [SpComm(phase="forward", collective="all-reduce", elements=n, operator="f̄", tensor="O"),
                 SpComm(phase="backward", collective="all-reduce", elements=n, operator="f", tensor="G_A")],
    }


def ring_elements_per_rank(collective: str, elements: int, n: int) -> float:
    """Elements one rank sends in a ring collective over a tensor of ``elements``:
    AllReduce 2(n−1)/n, AllGather / ReduceScatter (n−1)/n (nccl-tests' bus factors)."""
    return REGISTRY[collective].bus_factor(n) * elements


def comm_totals(comm: list[SpComm], n: int) -> dict:
    """Per-rank ring traffic (elements sent) of a comm list: the g/ḡ or f/f̄ pairs, and the rest."""
    block = sum(ring_elements_per_rank(c.collective, c.elements, n) for c in comm if c.operator != "LN")
    extra = sum(ring_elements_per_rank(c.collective, c.elements, n) for c in comm if c.operator == "LN")
    return {"block": block, "ln_grads": extra, "total": block + extra}


def _max_abs(a: Any, b: Any) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def run_sp_layer(tp: Any = 2, seq: Any = 4, batch: Any = 2, hidden: Any = 4, ffn: Any = 8, seed: Any = 0,
                 mistake: Any = "none", dropout: Any = None, backward_input: Any = "regather") -> SpLayerResult:
    """The block with TP + SP next to the one-device reference and plain TP (see module doc)."""
    o = validate_options(tp, seq, batch, hidden, ffn, seed, mistake, dropout, backward_input)
    inp = make_inputs(o["seed"], o["batch"], o["seq"], o["hidden"], o["ffn"])
    masks = reference_masks(o)
    reference = reference_block(inp, masks, o["dropout"])
    ranks, sharded, comm = sharded_block(inp, o)
    plain = plain_tp_block(inp, o, masks)
    tol = {k: REL_TOL * max(1.0, float(np.max(np.abs(getattr(reference, k))))) for k in RESULT_KEYS}
    err = {k: _max_abs(getattr(sharded, k), getattr(reference, k)) for k in RESULT_KEYS}
    T = o["tp"]
    return SpLayerResult(
        **o, eps=EPS,
        inputs=inp,
        reference=reference,
        sharded=sharded,
        max_abs_err=err,
        tolerances=tol,
        within_tolerance=all(err[k] <= tol[k] for k in RESULT_KEYS),
        ln_grads_agree=all(np.array_equal(rk.G_gamma, ranks[0].G_gamma)
                           and np.array_equal(rk.G_beta, ranks[0].G_beta) for rk in ranks),
        ranks=ranks,
        comm=comm,
        comm_per_rank=comm_totals(comm, T),
        plain_tp=SpPlainTp(**plain, max_abs_err={k: _max_abs(plain[k], getattr(reference, k)) for k in RESULT_KEYS},
                           comm_per_rank=comm_totals(plain["comm"], T)),
    )
