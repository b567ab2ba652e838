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
from ..validate import as_choice

NAME = "comm-cost"
HELP = "per-rank bytes of the TP collectives of a transformer layer (ring), optional time model"


def add_arguments(parser) -> None:
    parser.add_argument("--batch", default="1", metavar="B", help="micro-batch size (default 1)")
    parser.add_argument("--seq", metavar="L", help="sequence length")
    parser.add_argument("--hidden", metavar="H", help="hidden size")
    parser.add_argument("--tp", required=True, metavar="N", help="tensor-parallel size")
    parser.add_argument("--dtype-bytes", default="2", metavar="K", help="bytes per element (default 2)")
    parser.add_argument("--layers", metavar="N", help="number of layers (default 1, or the preset's)")
    parser.add_argument("--heads", metavar="A", help="attention heads, checked against tp (default: the preset's)")
    parser.add_argument("--kv-heads", metavar="A_KV", help="key/value heads (default: --heads, or the preset's)")
    parser.add_argument("--link-gbps", metavar="G", help="link bandwidth per direction, Gbit/s")
    parser.add_argument("--tflops", metavar="T", help="sustained TFLOP/s per GPU")
    parser.add_argument("--preset", metavar="NAME", help="one of: " + " ".join(PRESETS))


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
    result["preset"] = args.preset
    return result
