"""Training memory per rank: parameters, gradients, optimizer states and activations.

Letters (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", arXiv:2205.05198, Table 1):
    s sequence length     b micro-batch size     h hidden size      a attention heads
    L layers              t tensor-parallel size p pipeline-parallel size     v vocabulary
    d data-parallel size (for the distributed optimizer only)

Activations (the paper's §4): 16-bit activations (2 bytes), 1-byte dropout masks, small buffers
(LayerNorm mean and variance, biases) ignored; the paper's layer is GPT's: MLP 4h with GeLU,
K and V as wide as Q, dropout after attention scores, attention and MLP.  Per layer (§4.1):
attention 11sbh + 5as²b, MLP 19sbh, two LayerNorms 4sbh, so sbh(34 + 5as/h) (Eq. 1).  Of the
34: 24 are inside the TP region (÷t with TP), 10 outside it (LayerNorm inputs, dropout masks
after attention and MLP, the inputs of the QKV and first MLP linears), ÷t only with sequence
parallelism (Eq. 2 and 4; with SP Megatron stores only the sequence shard of the linears'
inputs and all-gathers it again in backward).  Selective recomputation drops the 5as²b of the
score, softmax, softmax-dropout tensors (§5).  Full recomputation stores only each layer's input,
2sbh (Table 2); the paper notes 2sbh/t is possible by storing 1/t per TP rank at the cost of an
extra all-gather and does not use it (§5; Megatron's ``distribute_saved_activations``).  With
sequence parallelism the layer input already *is* sequence-sharded, so full recomputation stores
2sbh/t and needs no extra collective (Megatron forbids ``distribute_saved_activations`` with SP
for that reason): the row ``full-sp`` below.

Attention implementation (``attention``): ``eager`` is the paper's layer, which stores the
score-side tensors 5as²b (softmax output 2as²b, its dropout mask as²b, the dropout output 2as²b).
``flash`` is fused attention (Dao et al. 2022, FlashAttention, §3.1 and Algorithm 2): the s × s
scores and probabilities are recomputed block by block in the backward pass from Q, K, V (stored
anyway) and the softmax statistics, and the dropout mask is regenerated from the saved RNG state,
so none of the 5as²b is stored.  What it keeps instead is one fp32 log-sum-exp per query row and
head (the ``softmax_lse`` of the flash-attn library; FlashAttention-2, Dao 2023, §3.1.1): 4asb
bytes, inside the TP region.  The output it returns is the input of the output projection,
counted already.  So flash ≈ selective recomputation for this term (selective stores 0, flash
4asb); with selective recomputation the flash call is itself recomputed and stores nothing more;
full recomputation is unchanged.

Pipeline parallelism (§4.2.3): with 1F1B the first stage holds p micro-batches of L/p layers, so
L layers' worth whatever p (Eq. 5) — the activations below are the first stage's.  Interleaved
schedules (× (1 + (p−1)/(pm))) are not modelled.  Extra terms (§4.3), included unless
``extras=False``: the embedding dropout mask sbh·p/t (1 byte, p micro-batches), and with p = 1
the final LayerNorm input 2sbh/t, the output layer input 2sbh/t and the fp32 logits 4sbv/t (the
paper's values with SP; without SP the first three are not divided by t, the logits still are:
they come out of the vocab-parallel output layer).  v is the padded vocabulary (Megatron pads it
to a multiple of 128·t; the paper's v = 51200 is GPT-2's 50257 padded for t = 8).

Model states (bytes per parameter, :data:`OPTIMIZERS`): ``mixed-adam`` = ZeRO (Rajbhandari et
al. 2020, §3.1) fp16 weights 2 + fp16 gradients 2 + fp32 master weights, momentum and variance
12 (K = 12), 16 in all; ``megatron-bf16`` and ``megatron-fp16`` = Megatron-LM's README
("Distributed Optimizer"): bf16 weights with fp32 gradients 2 + 4 + 12 = 18 (6 + 12/d with the
distributed optimizer), fp16 weights and gradients 2 + 2 + 16 = 20 (4 + 16/d; the 16 hold fp32
main weights, main gradients, momentum and variance).  The distributed optimizer divides the
optimizer column by d.  Parameters per rank are those of the first pipeline stage and one TP
rank: matrices of attention and MLP and the (vocab-parallel) word embedding ÷t; norms, the
row-parallel biases and position embeddings replicated.

The GQA presets: the activation formula counts K and V at full width (a heads of h/a); with k KV
heads they are k/a of that, and the score terms 5as²b are per *query* head, so unchanged.  The
formula is applied as the paper states it (its MLP term assumes 4h with GeLU and dropout masks);
``differs_from_formula`` lists where a preset's architecture departs from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .errors import TPMathError, name as field_name
from .validate import as_choice, as_int, check_divides

RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("eager", "flash")     # the paper's attention, or fused (FlashAttention): see the module doc
LSE_BYTES = 4                      # one fp32 log-sum-exp per query row and head (flash)
ARCHS = ("gpt", "llama")

# Bytes per parameter: weights, gradients, optimizer states (see the module docstring).
OPTIMIZERS: dict[str, dict[str, int]] = {
    "mixed-adam": {"weights": 2, "gradients": 2, "optimizer": 12},
    "megatron-bf16": {"weights": 2, "gradients": 4, "optimizer": 12},
    "megatron-fp16": {"weights": 2, "gradients": 2, "optimizer": 16},
}

PRESETS: dict[str, dict[str, Any]] = {
    # Touvron et al. 2023 (Llama 2), Table 1 (context 4k; GQA for 70B) and the released config.json:
    # hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size, vocab_size.
    "llama-2-7b": {"arch": "llama", "hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 32, "ffn": 11008,
                   "vocab": 32000, "seq": 4096},
    "llama-2-70b": {"arch": "llama", "hidden": 8192, "layers": 80, "heads": 64, "kv_heads": 8, "ffn": 28672,
                    "vocab": 32000, "seq": 4096},
    # Brown et al. 2020, Table 2.1 (n_layers 96, d_model 12288, n_heads 96, context 2048, d_ff = 4·d_model);
    # the GPT-2 BPE vocabulary of 50257 tokens (§2.1).
    "gpt-3-175b": {"arch": "gpt", "hidden": 12288, "layers": 96, "heads": 96, "kv_heads": 96, "ffn": 49152,
                   "vocab": 50257, "seq": 2048},
    # Korthikanti et al. 2022, Table 3 (with s = 2048 and v = 51200, §6), parallel settings included.
    "paper-22b": {"arch": "gpt", "hidden": 6144, "layers": 48, "heads": 64, "kv_heads": 64, "ffn": 24576,
                  "vocab": 51200, "seq": 2048, "tp": 8, "pp": 1, "batch": 4},
    "paper-175b": {"arch": "gpt", "hidden": 12288, "layers": 96, "heads": 96, "kv_heads": 96, "ffn": 49152,
                   "vocab": 51200, "seq": 2048, "tp": 8, "pp": 8, "batch": 1},
    "paper-530b": {"arch": "gpt", "hidden": 20480, "layers": 105, "heads": 128, "kv_heads": 128, "ffn": 81920,
                   "vocab": 51200, "seq": 2048, "tp": 8, "pp": 35, "batch": 1},
    "paper-1t": {"arch": "gpt", "hidden": 25600, "layers": 128, "heads": 160, "kv_heads": 160, "ffn": 102400,
                 "vocab": 51200, "seq": 2048, "tp": 8, "pp": 64, "batch": 1},
}

# One record per stored tensor of a layer (§4.1): (item, block, bytes in units of sbh, in units of
# as²b, region).  "tp": inside the TP region (÷t with TP); "seq": outside it (÷t only with SP).
LAYER_ITEMS: tuple[tuple[str, str, int, int, str], ...] = (
    ("qkv-input", "attention", 2, 0, "seq"),
    ("q-k", "attention", 4, 0, "tp"),
    ("softmax-output", "attention", 0, 2, "tp"),
    ("softmax-dropout-mask", "attention", 0, 1, "tp"),
    ("score-dropout-output", "attention", 0, 2, "tp"),
    ("v", "attention", 2, 0, "tp"),
    ("projection-input", "attention", 2, 0, "tp"),
    ("attention-dropout-mask", "attention", 1, 0, "seq"),
    ("fc1-input", "mlp", 2, 0, "seq"),
    ("gelu-input", "mlp", 8, 0, "tp"),
    ("fc2-input", "mlp", 8, 0, "tp"),
    ("mlp-dropout-mask", "mlp", 1, 0, "seq"),
    ("ln1-input", "layernorm", 2, 0, "seq"),
    ("ln2-input", "layernorm", 2, 0, "seq"),
)

# Table 2's rows (plus full recomputation with SP, see the module docstring): id -> (t forced to 1,
# sp, recompute).  "none" is "no parallelism": the TP row at t = 1.
CONFIGURATIONS = {
    "none": (True, False, "none"), "tp": (False, False, "none"), "tp-sp": (False, True, "none"), "tp-selective": (False, False, "selective"),
    "tp-sp-selective": (False, True, "selective"), "full": (False, False, "full"), "full-sp": (False, True, "full"),
}

LIMIT = 10**9   # generous bound on every size: keeps all products exact and JSON-safe


# -------------------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class LayerItem:
    """One stored tensor of a layer on one rank (§4.1, §4.2, §5)."""
    item: str                        # e.g. "qkv-input"
    block: str                       # attention / mlp / layernorm / layer
    region: str                      # "tp": split by t; "seq": replicated unless sequence parallel
    bytes: int | float


@dataclass(frozen=True, eq=False)
class ExtraItem:
    """An activation outside the layers (§4.3)."""
    item: str
    bytes: int | float


@dataclass(frozen=True, eq=False)
class Parameters:
    """Parameter counts: the whole model (unpadded vocabulary) and one rank (first stage)."""
    model: int
    per_rank: int
    vocab_padded: int | None         # None without a vocabulary


@dataclass(frozen=True, eq=False)
class MemoryResult:
    """Memory per rank (first pipeline stage, one TP rank) in bytes, activations itemised."""
    preset: str | None
    inputs: dict[str, Any]           # the validated options (:func:`validate_memory`)
    configuration: str               # Table 2's row (CONFIGURATIONS)
    activation_bytes_per_layer: int | float
    activation_breakdown: list[LayerItem]
    table2: dict[str, int | float]   # every row of Table 2 at these sizes, per layer
    activation_layers_bytes: int | float   # L/p layers
    activation_extra: list[ExtraItem]
    activation_bytes: int | float
    parameters: Parameters
    bytes_per_parameter: dict[str, float]  # weights, gradients, optimizer (OPTIMIZERS), optimizer_per_rank
    per_rank_bytes: dict[str, int | float]  # parameters, gradients, optimizer, activations, total
    per_rank_gib: dict[str, float]
    differs_from_formula: list[str]  # where the model departs from the paper's layer


# ----------------------------------------------------------------------------- validation

def validate_memory(seq: Any, batch: Any, hidden: Any, heads: Any, tp: Any = 1, sp: bool = False,
                    recompute: Any = "none", layers: Any = 1, kv_heads: Any = None, ffn: Any = None,
                    vocab: Any = None, pp: Any = 1, dp: Any = 1, optimizer: Any = "megatron-bf16",
                    distributed_optimizer: bool = False, arch: Any = "gpt", extras: bool = True,
                    attention: Any = "eager") -> dict:
    """Every option checked once, by name; the one place this module raises."""
    for name, value in (("seq", seq), ("hidden", hidden), ("heads", heads)):
        if value is None:
            raise TPMathError("option_or_preset", name, option=field_name(name))
    o = {"seq": as_int("seq", seq, 1, LIMIT), "batch": as_int("batch", batch, 1, LIMIT),
         "hidden": as_int("hidden", hidden, 1, LIMIT), "heads": as_int("heads", heads, 1, LIMIT),
         "tp": as_int("tp", tp, 1, 4096), "sp": bool(sp),
         "recompute": as_choice("recompute", recompute, RECOMPUTE), "layers": as_int("layers", layers, 1, LIMIT),
         "pp": as_int("pp", pp, 1, 4096), "dp": as_int("dp", dp, 1, LIMIT),
         "optimizer": as_choice("optimizer", optimizer, tuple(OPTIMIZERS)),
         "distributed_optimizer": bool(distributed_optimizer), "arch": as_choice("arch", arch, ARCHS),
         "extras": bool(extras), "attention": as_choice("attention", attention, ATTENTION)}
    o["kv_heads"] = o["heads"] if kv_heads is None else as_int("kv_heads", kv_heads, 1, LIMIT)
    o["ffn"] = 4 * o["hidden"] if ffn is None else as_int("ffn", ffn, 1, LIMIT)
    o["vocab"] = None if vocab is None else as_int("vocab", vocab, 1, LIMIT)
    check_divides(o["heads"], o["hidden"], "heads", "hidden")      # head dimension h/a
    check_divides(o["kv_heads"], o["heads"], "kv_heads", "heads")  # each KV head serves a/k query heads
    check_divides(o["tp"], o["heads"], "tp", "heads")              # Megatron splits heads by t
    check_divides(o["tp"], o["kv_heads"], "tp", "kv_heads")        # ... and the KV groups
    check_divides(o["tp"], o["ffn"], "tp", "ffn")
    check_divides(o["pp"], o["layers"], "pp", "layers")            # L/p layers per stage
    if o["sp"]:
        check_divides(o["tp"], o["seq"], "tp", "seq")              # equal sequence shards
    return o


def padded_vocab(v: int, t: int) -> int:
    """Megatron's padding: the next multiple of 128·t (``--make-vocab-size-divisible-by 128``)."""
    m = 128 * t
    return -(-v // m) * m


# ---------------------------------------------------------------------------- activations

def _exact(x: Fraction) -> int | float:
    """An exact byte count as int (every count here is integral when t divides a, h and s)."""
    return int(x) if x.denominator == 1 else float(x)


def layer_breakdown(s: int, b: int, h: int, a: int, t: int, sp: bool, recompute: str,
                    attention: str = "eager") -> list[LayerItem]:
    """Bytes of each stored tensor of one layer on one rank (§4.1, §4.2, §5, Table 2; flash
    attention: the module doc)."""
    sbh, as2b = s * b * h, a * s * s * b
    if recompute == "full":
        return [LayerItem(item="layer-input", block="layer", region="seq",
                          bytes=_exact(Fraction(2 * sbh, t if sp else 1)))]
    out = []
    for item, block, c_sbh, c_as2b, region in LAYER_ITEMS:
        if c_as2b and (recompute == "selective" or attention == "flash"):
            continue                      # recomputed in backward (selective; inside the flash kernel)
        divisor = t if region == "tp" or sp else 1
        out.append(LayerItem(item=item, block=block, region=region,
                             bytes=_exact(Fraction(c_sbh * sbh + c_as2b * as2b, divisor))))
        if item == "q-k" and attention == "flash" and recompute != "selective":
            out.append(LayerItem(item="softmax-lse", block="attention", region="tp",
                                 bytes=_exact(Fraction(LSE_BYTES * a * s * b, t))))   # a/t heads per rank
    return out


def activation_bytes_per_layer(s: int, b: int, h: int, a: int, t: int, sp: bool, recompute: str,
                               attention: str = "eager") -> int | float:
    """Table 2 of the paper, per layer and rank, in bytes (the sum of :func:`layer_breakdown`)."""
    return sum(i.bytes for i in layer_breakdown(s, b, h, a, t, sp, recompute, attention))


DIVIDED_BY = ("tp", "sp", "neither")   # what divides a stored tensor by t (Eq. 2 and 4)


def split_by_divisor(items: list[LayerItem], sp: bool) -> dict[str, int | float]:
    """One layer's bytes by what divides them: inside the TP region TP does ("tp"); outside it
    only sequence parallelism does ("sp"), and without it nothing does ("neither")."""
    out: dict[str, int | float] = dict.fromkeys(DIVIDED_BY, 0)
    for i in items:
        out["tp" if i.region == "tp" else "sp" if sp else "neither"] += i.bytes
    return out


def extra_activations(s: int, b: int, h: int, t: int, p: int, sp: bool, v: int) -> list[ExtraItem]:
    """§4.3: embedding dropout mask (p micro-batches); with p = 1 also the final LayerNorm input,
    the output layer input and the fp32 logits."""
    div = t if sp else 1
    out = [ExtraItem("embedding-dropout-mask", _exact(Fraction(s * b * h * p, div)))]
    if p == 1:
        out += [ExtraItem("final-ln-input", _exact(Fraction(2 * s * b * h, div))),
                ExtraItem("output-layer-input", _exact(Fraction(2 * s * b * h, div))),
                ExtraItem("logits-fp32", _exact(Fraction(4 * s * b * v, t)))]
    return out


# ----------------------------------------------------------------------------- parameters

def layer_parameters(arch: str, h: int, a: int, k: int, f: int) -> dict[str, int]:
    """Parameters of one layer: ``sharded`` (split by t) and ``replicated`` (on every TP rank)."""
    if arch == "llama":   # no biases; Wq, Wo h×h; Wk, Wv h×(k·h/a); SwiGLU gate, up, down; two RMSNorm γ
        return {"sharded": 2 * h * h + 2 * h * (k * (h // a)) + 3 * h * f, "replicated": 2 * h}
    # GPT: QKV h×3h (+3h bias, column parallel), projection h×h, fc1 h×f (+f bias), fc2 f×h; the
    # projection and fc2 biases (row parallel, added after the reduce) and two LayerNorms (γ, β) replicated.
    return {"sharded": 3 * h * h + 3 * h + h * h + h * f + f + f * h, "replicated": h + h + 4 * h}


def model_parameters(o: dict) -> Parameters:
    """Whole-model parameter count (unpadded vocabulary) and one rank's share (first stage)."""
    arch, h, a, k, f, L, t, p = (o[x] for x in ("arch", "hidden", "heads", "kv_heads", "ffn", "layers", "tp", "pp"))
    per_layer = layer_parameters(arch, h, a, k, f)
    v = o["vocab"] or 0
    vp = padded_vocab(v, t) if v else 0
    final_norm = h if arch == "llama" else 2 * h
    output = v * h if arch == "llama" else 0            # GPT ties the output layer to the word embedding
    position = o["seq"] * h if arch == "gpt" and v else 0
    layers_total = L * (per_layer["sharded"] + per_layer["replicated"])
    model = layers_total + v * h + output + position + final_norm
    rank = (L // p) * (per_layer["sharded"] // t + per_layer["replicated"])   # every term divisible by t
    rank += vp * h // t + position                       # word embedding vocab-parallel, positions replicated
    if p == 1:                                           # the first stage is also the last
        rank += final_norm + (vp * h // t if arch == "llama" else 0)
    return Parameters(model=model, per_rank=rank, vocab_padded=vp or None)


# ---------------------------------------------------------------------------------- public

def _configuration(t: int, sp: bool, recompute: str) -> str:
    """Table 2's row for these settings (at t = 1 sequence parallelism changes nothing)."""
    if t == 1 and recompute == "none":
        return "none"
    sp = sp and t > 1
    return next(name for name, (one, row_sp, row_rc) in CONFIGURATIONS.items()
                if not one and (row_sp, row_rc) == (sp, recompute))


def memory(seq: Any = None, batch: Any = None, hidden: Any = None, heads: Any = None, tp: Any = None,
           sp: bool = False, recompute: Any = "none", layers: Any = None, kv_heads: Any = None,
           ffn: Any = None, vocab: Any = None, pp: Any = None, dp: Any = 1, optimizer: Any = "megatron-bf16",
           distributed_optimizer: bool = False, arch: Any = None, extras: bool = True,
           preset: Any = None, attention: Any = "eager") -> MemoryResult:
    """Memory per rank (first pipeline stage, one TP rank) in bytes, with the activation terms
    itemised.  A ``preset`` fills the model's sizes (and the paper's parallel settings); explicit
    arguments win."""
    given = {"seq": seq, "batch": batch, "hidden": hidden, "heads": heads, "tp": tp, "layers": layers,
             "kv_heads": kv_heads, "ffn": ffn, "vocab": vocab, "pp": pp, "arch": arch}
    base = dict(PRESETS[as_choice("preset", preset, tuple(PRESETS))]) if preset is not None else {}
    merged = {**{"batch": 1, "tp": 1, "pp": 1, "layers": 1, "arch": "gpt"}, **base,
              **{k: v for k, v in given.items() if v is not None}}
    o = validate_memory(merged.get("seq"), merged.get("batch"), merged.get("hidden"), merged.get("heads"),
                        merged["tp"], sp, recompute, merged["layers"], merged.get("kv_heads"), merged.get("ffn"),
                        merged.get("vocab"), merged["pp"], dp, optimizer, distributed_optimizer, merged["arch"],
                        extras, attention)
    s, b, h, a, t, L, p = (o[x] for x in ("seq", "batch", "hidden", "heads", "tp", "layers", "pp"))
    breakdown = layer_breakdown(s, b, h, a, t, o["sp"], o["recompute"], o["attention"])
    per_layer = sum(i.bytes for i in breakdown)
    params = model_parameters(o)
    extra = extra_activations(s, b, h, t, p, o["sp"], params.vocab_padded) \
        if o["extras"] and o["vocab"] else []
    activations = per_layer * L + sum(e.bytes for e in extra)
    bpp = OPTIMIZERS[o["optimizer"]]
    opt_divisor = o["dp"] if o["distributed_optimizer"] else 1
    n = params.per_rank
    per_rank = {"parameters": n * bpp["weights"], "gradients": n * bpp["gradients"],
                "optimizer": _exact(Fraction(n * bpp["optimizer"], opt_divisor)), "activations": activations}
    per_rank["total"] = sum(per_rank.values())
    return MemoryResult(
        preset=preset, inputs=o, configuration=_configuration(t, o["sp"], o["recompute"]),
        activation_bytes_per_layer=per_layer, activation_breakdown=breakdown,
        table2={name: activation_bytes_per_layer(s, b, h, a, 1 if one else t, row_sp, row_rc, o["attention"])
                for name, (one, row_sp, row_rc) in CONFIGURATIONS.items()},
        activation_layers_bytes=per_layer * L, activation_extra=extra, activation_bytes=activations,
        parameters=params,
        bytes_per_parameter={**bpp, "optimizer_per_rank": _exact(Fraction(bpp["optimizer"], opt_divisor))},
        per_rank_bytes=per_rank, per_rank_gib={k: v / 2**30 for k, v in per_rank.items()},
        differs_from_formula=_differences(o),
    )


def _differences(o: dict) -> list[str]:
    """Where the model departs from the paper's layer, which the activation formula assumes."""
    out = []
    if o["kv_heads"] != o["heads"]:
        out.append("kv-heads")          # K and V are k/a as wide as the formula counts
    if o["ffn"] != 4 * o["hidden"]:
        out.append("ffn")               # the MLP term 19sbh assumes f = 4h
    if o["arch"] == "llama":
        out += ["swiglu", "no-dropout"]   # RMSNorm stores its input like LayerNorm: no departure
    return out
