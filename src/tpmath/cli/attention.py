"""``python -m tpmath attention``: multi-head attention with GQA, tensor-parallel by heads."""

from __future__ import annotations

import argparse

from ..attention import DEFAULTS, MISTAKES, run_attention

NAME = "attention"
HELP = ("multi-head attention with GQA split by heads (Megatron f before QKV, g after W_o; "
        "L = Σ Y⊙G): reference vs sharded, per-rank heads, collectives, KV replication cost")

EPILOG = """\
output keys (--json): config, inputs{X,W_q,W_k,W_v,W_o,G} (Megatron orientation (in, out);
head h = columns [h·E,(h+1)·E), E = hidden/heads; query head h reads KV head ⌊h·K/H⌋),
reference and sharded {Y,loss,G_X,G_W_q,G_W_k,G_W_v,G_W_o} (full shapes; sharded merged from
the ranks), max_abs_err, tolerances, matches_reference, ranks[{rank,q_heads,kv_heads, shards
W_q W_k W_v W_o, Q K V (B,S,·) scores probs (B,H/tp,S,S) context Y_partial Y loss, gradients,
shapes}], comm[{phase,collective,operator,tensor,elements,groups}], replica_spread,
kv_replication (KV weight/activation elements and bytes per rank vs without replication).
Inputs: numpy default_rng(seed).spawn(6): X, G ~ N(0,1) rounded to 0.1; weights N(0,1)/sqrt(fan-in)
rounded to 0.01."""


def add_common(parser: argparse.ArgumentParser) -> None:
    """Flags shared with ``layer``."""
    d = DEFAULTS
    parser.add_argument("--tp", default=str(d["tp"]), help=f"tensor-parallel size; must divide --heads (default {d['tp']})")
    parser.add_argument("--heads", default=str(d["heads"]), help=f"query heads H (default {d['heads']})")
    parser.add_argument("--kv-heads", dest="kv_heads", default=None,
                        help="KV heads K (default H); must divide H; K ≥ tp: tp divides K; K < tp: K divides tp "
                             "(each KV head replicated on tp/K ranks)")
    parser.add_argument("--seq", default=str(d["seq"]), help=f"sequence length S (default {d['seq']})")
    parser.add_argument("--batch", default=str(d["batch"]), help=f"batch B (default {d['batch']})")
    parser.add_argument("--hidden", default=str(d["hidden"]), help=f"hidden size D, divisible by H (default {d['hidden']})")
    parser.add_argument("--seed", default=str(d["seed"]), help=f"seed of the inputs (default {d['seed']})")
    parser.add_argument("--causal", action="store_true", help="causal mask: query i attends to keys 0..i")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_common(parser)
    parser.add_argument("--mistake", default="none", help=f"one of {', '.join(MISTAKES)} (default none)")
    parser.add_argument("--dtype-bytes", dest="dtype_bytes", default="2",
                        help="bytes per element for the KV replication cost (default 2, bf16)")


def run(args: argparse.Namespace) -> dict:
    return run_attention(tp=args.tp, heads=args.heads, kv_heads=args.kv_heads, seq=args.seq, batch=args.batch,
                         hidden=args.hidden, seed=args.seed, causal=args.causal, mistake=args.mistake,
                         dtype_bytes=args.dtype_bytes)
