"""``python -m tpmath comm-cost --batch B --seq L --hidden H --tp N [--dtype-bytes K] [--layers N]
[--heads A] [--kv-heads A_KV] [--link-gbps G] [--tflops T] [--preset NAME]``.

Per-rank bytes of each tensor-parallel collective of one transformer layer,
forward and backward, ring algorithm (named in the output), for all layers of one
micro-batch, and the optional time model.  ``--preset`` fills ``--seq``, ``--hidden``,
``--layers``, ``--heads`` and ``--kv-heads`` from a public model size; explicit flags win.
With heads (given or from the preset) tp must divide them, as in Megatron.
"""

from __future__ import annotations

from ..comm_cost import PRESETS, comm_cost
from ..errors import TPMathError
from ..record import fields_of
from ..validate import as_choice

NAME = "comm-cost"
# what the help strings (content/i18n/<lang>.cli.toml) quote, per option
HELP_ARGS = {"preset": {"choices": tuple(PRESETS)}}


def add_arguments(parser) -> None:
    parser.add_argument("--batch", default="1", metavar="B")
    parser.add_argument("--seq", metavar="L")
    parser.add_argument("--hidden", metavar="H")
    parser.add_argument("--tp", required=True, metavar="N")
    parser.add_argument("--dtype-bytes", default="2", metavar="K")
    parser.add_argument("--layers", metavar="N")
    parser.add_argument("--heads", metavar="A")
    parser.add_argument("--kv-heads", metavar="A_KV")
    parser.add_argument("--link-gbps", metavar="G")
    parser.add_argument("--tflops", metavar="T")
    parser.add_argument("--preset", metavar="NAME")


def run(args) -> dict:
    preset = PRESETS[as_choice("preset", args.preset, tuple(PRESETS))] if args.preset else {}
    seq = args.seq if args.seq is not None else preset.get("seq")
    hidden = args.hidden if args.hidden is not None else preset.get("hidden")
    layers = args.layers if args.layers is not None else preset.get("layers", 1)
    heads = args.heads if args.heads is not None else preset.get("heads")
    kv_heads = args.kv_heads if args.kv_heads is not None else (preset.get("kv_heads") if args.heads is None else None)
    for name, value in (("seq", seq), ("hidden", hidden)):
        if value is None:
            raise TPMathError("option_or_preset", name, option=f"--{name}")
    # the message names the model when the heads are the preset's
    model = preset.get("label") if args.heads is None and args.kv_heads is None else None
    result = comm_cost(args.batch, seq, hidden, args.tp, args.dtype_bytes, layers, args.link_gbps, args.tflops,
                       heads=heads, kv_heads=kv_heads, model=model)
    # the command line always says which preset it used (null: none)
    return {**fields_of(result), "preset": args.preset}
