"""``python -m tpmath layer``: a pre-LN transformer layer with tensor parallelism."""

from __future__ import annotations

import argparse

from ..layer import run_layer
from .attention import add_common

NAME = "layer"
HELP = ("pre-LN transformer layer LN → attention (GQA) → residual → LN → MLP (GeLU, tanh approximation) → "
        "residual, TP with 2 AllReduces forward and 2 backward: reference vs sharded, every gradient")

EPILOG = """\
output keys (--json): config, inputs{X,gamma1,beta1,W_q,W_k,W_v,W_o,b_o,gamma2,beta2,W1,b1,W2,b2,G}
(Megatron orientation (in, out)), reference and sharded {Y,loss,G_X,G_<every parameter>} (full shapes;
sharded merged from the ranks), max_abs_err, tolerances, matches_reference, ranks[{rank,q_heads,kv_heads,
ffn_cols, shards, A1 Y_attn_partial H1 A2 Z M Y_mlp_partial Y loss, gradients (the replicated
G_gamma1 G_beta1 G_b_o G_gamma2 G_beta2 G_b2 as each rank computed them), shapes}],
comm[{phase,collective,operator,tensor,elements,groups}], replica_spread (max |rank r − rank 0| of every
replicated value; 0: no AllReduce needed for LayerNorm or row-parallel bias gradients in plain TP)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_common(parser)
    parser.add_argument("--ffn", default=None, help="MLP width F, divisible by tp (default 4·hidden)")


def run(args: argparse.Namespace) -> dict:
    return run_layer(tp=args.tp, heads=args.heads, kv_heads=args.kv_heads, seq=args.seq, batch=args.batch,
                     hidden=args.hidden, ffn=args.ffn, seed=args.seed, causal=args.causal)
