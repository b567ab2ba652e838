"""Vocab-parallel cross-entropy on real ranks (Megatron's algorithm), one process per shard.

Letters as in :mod:`tpmath.vocab_ce`: V vocabulary, K ids per rank, N positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import collectives, vocab_ce
from ..i18n import Text
from ..record import fields_of
from ..validate import as_array, as_dtype, as_float, as_int, parse_json
from .output import tolerance, verdict
from .topic import Topic, opts


def _plan_vocab(o: dict) -> dict:
    logits = None if o["logits"] is None else as_array("logits", o["logits"], ndim=(1, 2))
    target = o["target"]
    if isinstance(target, str) and target.strip().startswith("["):
        target = parse_json("target", target)
    if logits is None and not isinstance(target, (list, tuple)) and as_int("ignore_index", o["ignore_index"]) == -100:
        # the page's logits: the same memoised run as the section's tables
        res = vocab_ce.default_run(as_int("target", vocab_ce.DEFAULT_TARGET if target is None else target),
                                   as_int("shards", o["shards"]), as_float("shift", o["shift"]),
                                   as_float("label_smoothing", o["label_smoothing"]),
                                   as_dtype("dtype", o["dtype"]).name)
    else:
        res = vocab_ce.run_vocab_ce(logits, target, shards=o["shards"], shift=o["shift"],
                                    label_smoothing=o["label_smoothing"], ignore_index=o["ignore_index"],
                                    dtype=o["dtype"])
    L = as_array("logits", vocab_ce.DEFAULT_LOGITS, ndim=1) if logits is None else logits
    return {"world": res.shards, "dtype": res.dtype, "logits": L, "core": res}


def vocab_names(a: int, b: int) -> dict[str, str | Text]:
    """Printed names of the vocab-parallel CE records of the rank owning ids [a, b)."""
    return {"ids": Text("real.vocab_ids"), "logits": f"z[{a}:{b}]", "local_max": Text("real.local_max"),
            "m": "m ← all_reduce(MAX)", "target_shifted": Text("real.target_shifted"),
            "t": "z_y − m ← all_reduce(SUM)", "local_sum_exp": Text("real.local_sum_exp"),
            "s": "Σ exp ← all_reduce(SUM)", "local_sum_shifted": Text("real.local_sum_shifted"),
            "sum_shifted": "Σ (z − m) ← all_reduce(SUM)", "loss": "loss",
            "prob": f"softmax[{a}:{b}]", "grad": f"dL/dz[{a}:{b}]"}


def vocab_ids(a: int, b: int, V: int) -> str | Text:
    """``0–2``, or ``4–5, padding 6–7`` when the shard reaches past V."""
    real = f"{a}–{min(b, V) - 1}" if min(b, V) > a else Text("real.ids_none")
    return real if b <= V else Text("real.ids_padding", ids=real, padding=f"{max(a, V)}–{b - 1}")


VOCAB_RECORDS = ("ids", "logits", "local_max", "m", "target_shifted", "t", "local_sum_exp", "s",
                 "local_sum_shifted", "sum_shifted", "loss", "prob", "grad")


def _expected_vocab(p: dict) -> tuple[list, list]:
    res = p["core"]
    V, eps = res.vocab, res.label_smoothing
    ranks = res.ranks
    common = {"m": res.global_max, "loss": res.loss,
              "t": collectives.reduce_all([e.target_shifted for e in ranks], "sum"),
              "s": res.global_sum_exp}
    if eps:
        common["sum_shifted"] = collectives.reduce_all([e.local_sum_shifted for e in ranks], "sum")
    per_rank = []
    for e in ranks:
        a, b = e.vocab_range
        values = {**fields_of(e), **common, "ids": vocab_ids(a, b, V)}
        names = vocab_names(a, b)
        per_rank.append([(names[k], values[k]) for k in VOCAB_RECORDS if k in values])
    return per_rank, vocab_check(res.loss, res.reference_loss, res.grad, res.reference_grad,
                                 res.dtype, res.counted)


def vocab_check(loss: float, ref_loss: float, grad: Any, ref_grad: Any, dtype: str, counted: int) -> list:
    """Rank 0's comparison of the vocab-parallel loss and gradient with the unsharded ones."""
    if counted == 0:
        # PyTorch's mean over zero positions is NaN; we define the loss as 0 (nothing to learn),
        # and the gradient must then be 0 everywhere
        return [("loss", Text("real.all_ignored")),
                ("max|dL/dz|", verdict(float(np.max(np.abs(np.asarray(grad, np.float64)), initial=0.0)),
                                        tolerance(dtype, 1.0)))]
    return [("max|Δ| loss", verdict(abs(float(loss) - float(ref_loss)), tolerance(dtype, ref_loss))),
            ("max|Δ| dL/dz", verdict(float(np.max(np.abs(np.asarray(grad, np.float64)
                                                        - np.asarray(ref_grad, np.float64)))),
                                     tolerance(dtype, ref_grad)))]



TOPICS = (Topic("vocab-ce", opts(
    ("shards", "2"), ("target", None), ("shift", "0"), ("label-smoothing", "0"), ("ignore-index", "-100"),
    ("dtype", "float64"), ("logits", None),
), _plan_vocab, _expected_vocab, real_module="vocab_ce"),)
