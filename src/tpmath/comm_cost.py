"""Communication cost of one Megatron transformer layer under tensor parallelism.

Letters (as on the page):
    B   micro-batch size (sequences)          L   sequence length (tokens)
    h   hidden size (d_model)                 n   tensor-parallel size (tp)
    k   bytes per element (2 for fp16/bf16)   N   number of layers
    a   attention (query) heads               a_kv key/value heads (grouped-query attention)
    S   = B·L·h, elements of one full activation tensor (B, L, h), each of k bytes
    m   micro-batches per optimizer step (not an input: per step = m × one micro-batch)

What is communicated (Megatron-LM, Shoeybi et al. 2019, §3 and Fig. 4): each
layer has two column→row blocks (attention: QKV column-parallel, output
projection row-parallel; MLP: up projection column-parallel, down projection
row-parallel).  Forward, the operator f̄ after each row-parallel linear
all-reduces the partial outputs (B, L, h).  Backward, the operator f before
each column-parallel linear all-reduces the partial input gradients (B, L, h).
So 2 + 2 AllReduces of S = B·L·h elements per layer, per micro-batch.

Heads: attention is split by heads, so Megatron requires tp | a (each rank holds a/tp whole
heads) and a_kv a multiple or a divisor of tp (KV heads split, or each replicated on tp/a_kv
ranks); the head size h/a must be whole.  The bytes do not depend on the heads.

Bytes (ring algorithm, see ``schedules``): in a ring AllReduce of S elements every
rank sends 2(n−1)/n · S·k bytes and receives as much; ReduceScatter and AllGather each
move (n−1)/n · S·k per rank.  Sequence parallelism (Korthikanti et al. 2022)
replaces each AllReduce by an AllGather plus a ReduceScatter over the sequence
dimension (the same bytes), and Megatron-core adds one AllGather per block in backward: its
``LinearWithGradAccumulationAndAsyncCommunication`` saves only the sequence shard of the
column-parallel input and gathers it again for the weight gradient, overlapped with the
input-gradient GEMM.  So 10 collectives of (n−1)/n·S·k per layer instead of the 8 halves of
the four AllReduces: 25 % more bytes, for activations outside the TP blocks split by n.

Time model (optional, bandwidth only, no latency term):
    t_comm = bytes sent per rank for all N layers of one micro-batch / link bandwidth
             (one direction, bytes/s)
    FLOPs per layer, forward = 24·B·L·h² + 4·B·L²·h   (matrix multiplies only:
        QKV 6BLh², scores QKᵀ 2BL²h, attention·V 2BL²h, output 2BLh², MLP with 4h 16BLh²)
    backward = 2 × forward, so for one micro-batch per rank:
        FLOPs = N · 3 · (24·B·L·h² + 4·B·L²·h) / n = N · 72·B·L·h²·(1 + L/(6h)) / n
    (Narayanan et al. 2021, §5.1, count 96·B·L·h²·(1 + L/(6h)) per layer because
    they include activation recomputation, a fourth pass; logits layer not counted here)
    t_calc = FLOPs / (tflops · 10¹²)
    overlap: t = max(t_calc, t_comm) (an optimistic bound: in Megatron TP the
    all-reduce result is needed by the very next operation); serial: t = t_calc + t_comm.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from . import fmt
from .errors import TPMathError
from .i18n import Text
from .record import OMIT_IF_NONE
from .schedules import bus_bandwidth_factor, chunk_sizes
from .validate import as_choice, as_float, as_int, check_divides

# Public model sizes.  FLOP formula above assumes a GPT-style layer (MLP width 4h,
# full multi-head attention); Llama 2 uses SwiGLU and (70B) grouped-query attention,
# so its FLOPs differ by tens of percent, but the TP bytes (B·L·h per collective) do not.
# ``heads`` / ``kv_heads``: attention (query) heads and key/value heads; TP must divide them.
PRESETS: dict[str, dict] = {
    # Radford et al. 2019, "Language Models are Unsupervised Multitask Learners", Table 2
    # (1542M: 48 layers, d_model 1600) and §2.3 (context 1024 tokens); the heads are not in the
    # paper: the released config https://huggingface.co/openai-community/gpt2-xl/blob/main/config.json
    # ("n_head": 25, "n_embd": 1600, "n_layer": 48, "n_ctx": 1024).
    "gpt2-xl": {"hidden": 1600, "layers": 48, "seq": 1024, "heads": 25, "kv_heads": 25,
                "label": "GPT-2 XL (1.5B)"},
    # Shoeybi et al. 2019, "Megatron-LM", Table 1 (8.3B: hidden size 3072, 32 attention heads,
    # 72 layers); sequence length 1024 (§5).
    "megatron-8.3b": {"hidden": 3072, "layers": 72, "seq": 1024, "heads": 32, "kv_heads": 32,
                      "label": "Megatron-LM 8.3B"},
    # Touvron et al. 2023, "Llama 2", Table 1 (context 4k; GQA for 34B and 70B) and the released
    # configs https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json (hidden_size 4096,
    # num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 32) and
    # https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json (8192, 80 layers,
    # num_attention_heads 64, num_key_value_heads 8).
    "llama-2-7b": {"hidden": 4096, "layers": 32, "seq": 4096, "heads": 32, "kv_heads": 32,
                   "label": "Llama-2-7B"},
    "llama-2-70b": {"hidden": 8192, "layers": 80, "seq": 4096, "heads": 64, "kv_heads": 8,
                    "label": "Llama-2-70B"},
    # Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1
    # (175B: 96 layers, d_model 12288, n_heads 96, d_head 128, context 2048).
    "gpt-3-175b": {"hidden": 12288, "layers": 96, "seq": 2048, "heads": 96, "kv_heads": 96,
                   "label": "GPT-3 175B"},
}

# Links one GPU's TP traffic may cross, per direction (what the time model divides by).  NVIDIA
# quotes NVLink as the total of both directions; a ring AllReduce sends and receives at once, so
# its time is set by one direction: half the quoted figure.  ``total_gb_s``: the quoted number,
# ``per_direction_gb_s``: what the calculator uses (10⁹ bytes/s); the page's NVLink table cites them.
HARDWARE: dict[str, dict] = {
    # H100 SXM datasheet: fourth-generation NVLink, 18 links, 900 GB/s.
    "h100": {"kind": "nvlink", "total_gb_s": 900, "per_direction_gb_s": 450, "label": "H100 SXM (NVLink)"},
    # H800 SXM, the H100 for China: NVLink cut to 400 GB/s ("Insights into DeepSeek-V3", Zhao et al.
    # 2025, arXiv:2505.09343, §4: 400 GB/s against H100's 900 GB/s).
    "h800": {"kind": "nvlink", "total_gb_s": 400, "per_direction_gb_s": 200, "label": "H800 SXM (NVLink)"},
    # A100 SXM datasheet: third-generation NVLink, 12 links, 600 GB/s.
    "a100": {"kind": "nvlink", "total_gb_s": 600, "per_direction_gb_s": 300, "label": "A100 SXM (NVLink)"},
    # A800, the A100 for China: NVLink cut to 400 GB/s (Reuters, November 2022).
    "a800": {"kind": "nvlink", "total_gb_s": 400, "per_direction_gb_s": 200, "label": "A800 SXM (NVLink)"},
    # One InfiniBand NDR port, 400 Gb/s per direction (a DGX H100 has one per GPU).
    "ib-ndr": {"kind": "network", "total_gb_s": 100, "per_direction_gb_s": 50, "label": "InfiniBand NDR 400 Gb/s"},
}


def link_gbps(hardware: str) -> float:
    """The per-direction bandwidth of one ``HARDWARE`` entry in Gb/s (10⁹ bit/s), as ``link_gbps`` takes it."""
    return HARDWARE[as_choice("hardware", hardware, tuple(HARDWARE))]["per_direction_gb_s"] * 8


# (phase, where, collective, Megatron operator) for one layer, in execution order; ``where`` names
# the sentence comm.where_<where> (content/i18n/<lang>.core.toml).
TP_COLLECTIVES = (
    ("forward", "attn_out", "all-reduce", "f̄"),
    ("forward", "mlp_down", "all-reduce", "f̄"),
    ("backward", "mlp_up", "all-reduce", "f"),
    ("backward", "qkv", "all-reduce", "f"),
)

SP_COLLECTIVES = (
    ("forward", "sp_gather_attn", "all-gather", "g"),
    ("forward", "sp_scatter_attn_out", "reduce-scatter", "ḡ"),
    ("forward", "sp_gather_mlp", "all-gather", "g"),
    ("forward", "sp_scatter_mlp_down", "reduce-scatter", "ḡ"),
    ("backward", "sp_grad_gather_mlp_down", "all-gather", "ḡ"),
    ("backward", "sp_regather_mlp", "all-gather", "g"),          # Megatron: the input of fc1 again
    ("backward", "sp_grad_scatter_mlp", "reduce-scatter", "g"),
    ("backward", "sp_grad_gather_attn_out", "all-gather", "ḡ"),
    ("backward", "sp_regather_attn", "all-gather", "g"),         # ... and of the QKV projection
    ("backward", "sp_grad_scatter_attn", "reduce-scatter", "g"),
)
SP_REGATHER = ("sp_regather_mlp", "sp_regather_attn")     # the rows a layer that kept its input would not run


# -------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class CommRow:
    """One collective of one layer: where it runs, on how many elements, what one rank sends."""
    phase: str                       # forward / backward
    where: Text                      # comm.where_<where>
    collective: str
    operator: str                    # f̄ / f (ḡ / g with sequence parallelism), Korthikanti et al.'s letters
    elements: int                    # S = B·L·h, the full tensor
    bus_factor: float
    bytes_per_rank: int              # the busiest rank, ring algorithm


@dataclass(frozen=True, eq=False)
class SpUnavailable:
    """Sequence parallelism needs tp to divide the sequence; why it does not here."""
    available: bool                  # False
    reason: Text


@dataclass(frozen=True, eq=False)
class SequenceParallel:
    """The same layer with sequence parallelism, as Megatron-core runs it: AllGather + ReduceScatter
    per AllReduce, and the input of each column-parallel linear gathered again in backward."""
    available: bool                  # True
    per_layer: list[CommRow]         # the 10 collectives, in execution order
    per_layer_bytes: int             # all of them
    per_step_bytes: int
    recompute_all_gather_bytes_per_layer: int    # the two re-gathers
    per_layer_bytes_keeping_input: int           # without them: the bytes of the four AllReduces
    note: Text


@dataclass(frozen=True, eq=False)
class CommCost:
    """Per-rank bytes of the TP collectives of a layer and of a step, and the optional time model
    (its fields only with ``link_gbps`` and / or ``tflops``)."""
    inputs: dict[str, Any]           # batch, seq, hidden, tp, dtype_bytes, layers, heads, kv_heads, link_gbps, tflops
    algorithm: str                   # "ring"
    activation_bytes: int            # one (B, L, h) activation
    per_layer: list[CommRow]
    # the two AllReduces (f̄) of the forward pass and the two (f) of the backward pass
    per_layer_forward_bytes: int
    per_layer_backward_bytes: int
    per_layer_bytes: int
    per_step_bytes: int              # all layers, one micro-batch
    closed_form_per_layer_bytes: float
    convention: Text
    sequence_parallel: SequenceParallel | SpUnavailable
    flops_per_layer_forward: int
    flops_per_rank_step: float
    # with link_gbps
    link_bytes_per_s: float | None = field(default=None, metadata=OMIT_IF_NONE)
    t_comm_s: float | None = field(default=None, metadata=OMIT_IF_NONE)
    # with tflops
    t_calc_s: float | None = field(default=None, metadata=OMIT_IF_NONE)
    # with both
    t_overlap_s: float | None = field(default=None, metadata=OMIT_IF_NONE)
    t_serial_s: float | None = field(default=None, metadata=OMIT_IF_NONE)
    comm_fraction_serial: float | None = field(default=None, metadata=OMIT_IF_NONE)
    # the preset named (command line and comm_cost_preset)
    preset: str | None = field(default=None, metadata=OMIT_IF_NONE)


def ring_bytes_per_rank(name: str, elements: int, n: int, elem_bytes: int) -> int:
    """Bytes the busiest rank sends in a ring ``name`` over ``elements`` (the full tensor).

    AllReduce: rank r sends all chunks but c_r (reduce-scatter) and all but c_{r+1}
    (all-gather); ReduceScatter / AllGather: one of the two phases.
    """
    if n == 1:
        return 0
    c = chunk_sizes(elements, n)
    if name == "all-reduce":
        return max((2 * elements - c[r] - c[(r + 1) % n]) * elem_bytes for r in range(n))
    return max(elements - c[r] for r in range(n)) * elem_bytes  # RS or AG: every chunk but one


def layer_flops(batch: int, seq: int, hidden: int) -> int:
    """Forward FLOPs of one GPT-style layer (matrix multiplies): 24·B·L·h² + 4·B·L²·h."""
    return 24 * batch * seq * hidden ** 2 + 4 * batch * seq ** 2 * hidden


def _rows(table, elements: int, n: int, k: int) -> list[CommRow]:
    return [CommRow(phase=phase, where=Text(f"comm.where_{where}"), collective=name, operator=operator,
                    elements=elements, bus_factor=bus_bandwidth_factor(name, n),
                    bytes_per_rank=ring_bytes_per_rank(name, elements, n, k))
            for phase, where, name, operator in table]


MAX_TP = 4096
MAX_HEADS = 1_000_000


def tp_choices(heads: int, kv_heads: int, limit: int = MAX_TP) -> list[int]:
    """Every tp ≤ ``limit`` Megatron accepts for these heads: tp | heads, and kv_heads a
    multiple or a divisor of tp."""
    return [t for t in range(1, min(heads, limit) + 1)
            if heads % t == 0 and (kv_heads % t == 0 or t % kv_heads == 0)]


def check_heads(tp: int, heads: int, kv_heads: int, hidden: int, model: str | None = None) -> None:
    """Raise unless Megatron can split these heads over ``tp`` ranks (the rules of its
    TransformerConfig: num_attention_heads a multiple of tp; num_query_groups a multiple or a
    divisor of tp) and the head size hidden/heads is whole.  A tp that does not fit is the
    fault of ``tp`` (the field a reader changes), and the message names the head count and,
    for a preset, the model."""
    if hidden % heads:
        raise TPMathError("head_size_uneven", "heads", hidden=hidden, heads=heads)
    if heads % kv_heads:
        raise TPMathError("kv_not_dividing_heads", "kv_heads", kv_heads=kv_heads, heads=heads)
    choices = ", ".join(fmt.integer(t) for t in tp_choices(heads, kv_heads))
    if heads % tp:
        if model is None:
            raise TPMathError("tp_heads", "tp", tp=tp, heads=heads, choices=choices)
        raise TPMathError("tp_heads_model", "tp", tp=tp, heads=heads, model=model, choices=choices)
    if kv_heads % tp and tp % kv_heads:
        raise TPMathError("tp_kv_heads", "tp", tp=tp, kv_heads=kv_heads, choices=choices)


# Upper bounds of the link and compute rates: far above any machine (10 Pb/s, an exaflop per
# rank), and low enough that the times stay finite and non-zero (at 1e308 the product overflows
# and the communication fraction becomes 0/0).
LINK_GBPS_MAX = 1e7
TFLOPS_MAX = 1e6


def comm_cost(batch: Any, seq: Any, hidden: Any, tp: Any, dtype_bytes: Any = 2, layers: Any = 1,
              link_gbps: Any = None, tflops: Any = None, heads: Any = None, kv_heads: Any = None,
              model: str | None = None) -> CommCost:
    """Per-rank bytes of each TP collective of one layer (ring), per pass, per layer, for all
    layers of one micro-batch, and an optional time model.

    ``link_gbps`` is the per-direction link bandwidth in gigabits per second
    (10⁹ bit/s; e.g. 300 GB/s NVLink per direction = 2400); ``tflops`` the
    sustained dense throughput per GPU in 10¹² FLOP/s.  ``heads`` (and ``kv_heads``,
    default ``heads``) are checked against tp as Megatron does (:func:`check_heads`);
    ``model`` names the preset they come from in that message.
    """
    # Generous upper bounds (far above any real model) keep every product exact in float64.
    B = as_int("batch", batch, 1, 1_000_000)
    L = as_int("seq", seq, 1, 10_000_000)
    h = as_int("hidden", hidden, 1, 1_000_000)
    n = as_int("tp", tp, 1, MAX_TP)
    k = as_int("dtype_bytes", dtype_bytes, 1, 8)
    N = as_int("layers", layers, 1, 10_000)
    a = None if heads is None else as_int("heads", heads, 1, MAX_HEADS)
    a_kv = a if kv_heads is None else as_int("kv_heads", kv_heads, 1, MAX_HEADS)
    if a is not None:
        check_heads(n, a, a_kv, h, model)
    check_divides(n, h, "tp", "hidden")   # Megatron splits heads and the 4h MLP by tp
    elements = B * L * h                  # S: one (B, L, h) activation
    per_layer = _rows(TP_COLLECTIVES, elements, n, k)
    per_layer_bytes = sum(r.bytes_per_rank for r in per_layer)
    per_step_bytes = per_layer_bytes * N     # all N layers, one micro-batch (a step repeats it per micro-batch)
    flops_per_rank_step = 3 * N * layer_flops(B, L, h) / n
    inputs = {"batch": B, "seq": L, "hidden": h, "tp": n, "dtype_bytes": k, "layers": N,
              "heads": a, "kv_heads": a_kv, "link_gbps": None, "tflops": None}
    times: dict[str, float] = {}
    if link_gbps is not None:
        inputs["link_gbps"] = g = as_float("link_gbps", link_gbps, 1e-9, LINK_GBPS_MAX)
        times["link_bytes_per_s"] = g * 1e9 / 8
        times["t_comm_s"] = per_step_bytes / times["link_bytes_per_s"]
    if tflops is not None:
        inputs["tflops"] = t = as_float("tflops", tflops, 1e-9, TFLOPS_MAX)
        times["t_calc_s"] = flops_per_rank_step / (t * 1e12)
    if link_gbps is not None and tflops is not None:
        times["t_overlap_s"] = max(times["t_calc_s"], times["t_comm_s"])
        times["t_serial_s"] = times["t_calc_s"] + times["t_comm_s"]
        times["comm_fraction_serial"] = times["t_comm_s"] / times["t_serial_s"]
    return CommCost(
        inputs=inputs, algorithm="ring", activation_bytes=elements * k, per_layer=per_layer,
        per_layer_forward_bytes=sum(r.bytes_per_rank for r in per_layer if r.phase == "forward"),
        per_layer_backward_bytes=sum(r.bytes_per_rank for r in per_layer if r.phase == "backward"),
        per_layer_bytes=per_layer_bytes, per_step_bytes=per_step_bytes,
        closed_form_per_layer_bytes=4 * 2.0 * (n - 1) / n * elements * k, convention=Text("comm.convention"),
        sequence_parallel=_sequence_parallel(B, L, h, n, k, N), flops_per_layer_forward=layer_flops(B, L, h),
        flops_per_rank_step=flops_per_rank_step, **times,
    )


def _sequence_parallel(B: int, L: int, h: int, n: int, k: int, N: int) -> SequenceParallel | SpUnavailable:
    """The same layer with sequence parallelism: AllGather + ReduceScatter per AllReduce."""
    if L % n != 0:
        return SpUnavailable(available=False, reason=Text("comm.sp_unavailable", seq=str(L), tp=str(n), rest=str(L % n)))
    rows = _rows(SP_COLLECTIVES, B * L * h, n, k)
    total = sum(r.bytes_per_rank for r in rows)
    # Megatron-LM keeps only the sequence shard of each column-parallel input and
    # all-gathers it again in backward to form the weight gradient (overlapped with dX).
    extra = sum(r.bytes_per_rank for r, (_, where, _, _) in zip(rows, SP_COLLECTIVES) if where in SP_REGATHER)
    return SequenceParallel(available=True, per_layer=rows, per_layer_bytes=total, per_step_bytes=total * N,
                            recompute_all_gather_bytes_per_layer=extra, per_layer_bytes_keeping_input=total - extra,
                            note=Text("comm.sp_note"))


def comm_cost_preset(preset: str, batch: int = 1, tp: int = 8, dtype_bytes: int = 2, **kw) -> CommCost:
    """``comm_cost`` for one of ``PRESETS`` (hidden, seq, layers and heads from the preset)."""
    p = PRESETS[as_choice("preset", preset, tuple(PRESETS))]
    out = comm_cost(batch, p["seq"], p["hidden"], tp, dtype_bytes, p["layers"], heads=p["heads"],
                    kv_heads=p["kv_heads"], model=p["label"], **kw)
    return dataclasses.replace(out, preset=preset)
