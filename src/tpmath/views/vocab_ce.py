"""Views of vocabulary-parallel cross-entropy (page 1).

Sections
--------
``vocab-ce``      the seed's six logits split over ``shards`` ranks: the three merged
                  numbers, the loss, per-rank pieces (``vocab-ranks``) and per-token
                  probability and gradient (``vocab-tokens``).
``vocab-extras``  Megatron's vocabulary padding (``vocab-padding``), label smoothing,
                  ours (= PyTorch) vs Megatron's per rank, K = its padded width, its padded
                  logits unmasked (``vocab-smoothing``) and ignore_index (``vocab-ignore``).
``vocab-head``    an output layer: its inputs h, W_out, targets (``vocab-head-inputs``) and
                  the gradient of the shared hidden state summed across vocab shards
                  (``vocab-hidden``), gradients of the mean loss.

Letters as in :mod:`tpmath.vocab_ce`: V vocabulary, tp (= shards) ranks, Vp padded
vocabulary, K ids per rank, N positions, ε label smoothing.
"""

from __future__ import annotations

import numpy as np

from .. import vocab_ce as core
from ..collectives import reduce_all
from .. import fmt
from . import Control, Section, parse_controls
from . import tree
from .cells import id_range, int_range, label, rank, table
from .fig_vocab_ce import figure_vocab_ce, figure_vocab_extras

V = len(core.DEFAULT_LOGITS)
# The demo opens on target 4 (logit 1.4), not the seed's 2: 2 is the largest logit, so z_y − m = 0 and
# every rank's target term is 0, which hides the merge the section is about.  2 stays one click away.
PAGE_TARGET = 4
GPT2_VOCAB = 50257                      # GPT-2's BPE vocabulary (an input, not a result)
PAD_TP = (1, 2, 4, 8)                   # tensor-parallel sizes of the padding table
IGNORE_INDEX = -100                     # PyTorch's default
# The extras open on 4 ranks, which do not divide V = 6: the vocabulary is padded (to 8, K = 2 per rank),
# the case where Megatron's padded logits enter its smoothed loss.
EXTRAS_TP = 4
# Three positions for the ignore_index example: the seed's logits, reversed, rotated by two;
# the middle position is ignored.
IGNORE_LOGITS = [core.DEFAULT_LOGITS, core.DEFAULT_LOGITS[::-1], core.DEFAULT_LOGITS[2:] + core.DEFAULT_LOGITS[:2]]
IGNORE_TARGETS = [2, IGNORE_INDEX, 4]


def _range_cell(vocab_range: list[int], padding_range: list[int] | None) -> str | dict:
    """Vocabulary ids [a, b) of a rank; padding ids (masked) named separately."""
    a, b = vocab_range
    if padding_range is None:
        return id_range(a, b)
    pa, pb = padding_range
    real = id_range(a, pa) if pa > a else "—"
    return label("label.range_padded", ids=real, pad=id_range(pa, pb))


def render_vocab_ce(controls: dict, lang: str) -> dict:
    """Vocab-parallel CE of the seed's logits for one shard count, target and shift."""
    c = parse_controls(SECTIONS["vocab-ce"].controls, controls)
    shards, target, shift = c["shards"], c["target"], c["shift"]
    res = core.default_run(target, shards, shift)
    unshifted = core.default_run(target, shards)   # the same, shift 0
    top = tree.scale_of(*(e.logits for e in res.ranks))     # one shading scale for all shards
    rank_rows = [[tree.rank_tag(e.rank), _range_cell(e.vocab_range, e.padding_range),
                  tree.grid(e.logits, rank=e.rank, scale=top),
                  fmt.num(e.local_max), fmt.num(e.local_sum_exp), fmt.num(e.target_shifted)]
                 for e in res.ranks]
    token_rows = [[fmt.integer(t.token), tree.rank_tag(t.rank), fmt.num(t.prob), fmt.num(t.grad)]
                  for t in res.tokens]
    notes = {}
    if res.padded_vocab != res.vocab:
        notes["padding"] = label("note.vocab_padded", vocab=fmt.integer(res.vocab),
                                 padded=fmt.integer(res.padded_vocab), shards=fmt.integer(shards))
    return {
        "controls": {"shards": str(shards), "target": str(target), "shift": shift},
        "tables": {
            "vocab-ranks": table("cap.vocab_ranks", ["col.rank", "col.vocab_range", "col.logits", "col.local_max",
                                                     "col.local_sum_exp", "col.target_shifted"], rank_rows),
            "vocab-tokens": table("cap.vocab_tokens", ["col.token", "col.rank", "col.probability", "col.gradient"],
                                  token_rows),
        },
        "values": {
            "global-max": fmt.num(res.global_max),
            "global-sum-exp": fmt.num(res.global_sum_exp),
            "loss": fmt.num(res.loss),
            "reference-loss": fmt.num(res.reference_loss),
            "target-rank": rank(res.target_rank),
            "abs-diff": fmt.err(res.abs_diff),
            "shift-diff": fmt.err(res.loss - unshifted.loss),
            "padded-vocab": fmt.integer(res.padded_vocab),
        },
        "notes": notes,
        "figures": {"vocab-ce": figure_vocab_ce(res)},
    }


def _padding_rows(tp: int) -> list:
    """Megatron's padded GPT-2 vocabulary for the usual tp sizes and the chosen one."""
    rows = []
    for t in sorted(set(PAD_TP) | {tp}):
        pad = core.vocab_pad_table(GPT2_VOCAB, t)
        rows.append([fmt.integer(t), fmt.integer(pad.divisor), fmt.integer(pad.padded_vocab),
                     fmt.integer(pad.padding), fmt.integer(pad.per_rank)])
    return rows


def _smoothing_rows(res: core.VocabCeResult) -> tuple[list, list]:
    """Per rank: our loss (all ranks agree, = PyTorch) and Megatron's on the same logits, whose K
    is the rank's padded width and whose padded logits are numbers (``res.megatron``)."""
    ref = res.reference_loss
    meg = res.megatron

    def megatron(v):                                    # Megatron's value, its difference from PyTorch
        return (label("label.undefined_k"), "—") if v is None else (fmt.num(v), fmt.err(v - ref))

    terms = smoothing_terms(res)
    rows = [[tree.rank_tag(e.rank), _range_cell(e.vocab_range, e.padding_range), fmt.integer(meg.K),
             _num_or_dash(terms["sums"][e.rank]), fmt.num(terms["means"][e.rank]), fmt.num(res.loss),
             *megatron(meg.loss_per_rank[e.rank])] for e in res.ranks]
    foot = [[label("label.pytorch_reference"), "—", fmt.integer(res.vocab), _num_or_dash(terms["total"]), "—", fmt.num(ref),
             "—", "—"],
            [label("label.megatron_tp1"), "—", fmt.integer(res.vocab), "—", "—", "—", *megatron(meg.loss_tp1)]]
    return rows, foot


def _num_or_dash(v) -> str:
    return "—" if v is None else fmt.num(v)


def smoothing_terms(res: core.VocabCeResult) -> dict:
    """What each rank adds up for label smoothing (1-D logits): ours, Σ (z − m) over its real ids
    (``sums``, None without smoothing) and their AllReduce(SUM) (``total``); Megatron's, the mean
    of log p over its K columns, padding included (``means``; ``log_p``: every padded id's, the
    same logits, its padded logits numbers)."""
    Z = np.atleast_2d(np.asarray(core.DEFAULT_LOGITS, dtype=np.float64))
    ranges = [tuple(e.vocab_range) for e in res.ranks]
    log_p = core.megatron_log_p(Z, res.vocab, res.padded_vocab, res.megatron.pad_logit)
    out = {"log_p": log_p[0].tolist(), "means": [float(m[0]) for m in core.megatron_local_means(log_p, ranges)],
           "sums": [None] * len(ranges), "total": None}
    if res.ranks[0].local_sum_shifted is not None:
        out["sums"] = [float(e.local_sum_shifted) for e in res.ranks]
        out["total"] = float(reduce_all(out["sums"], "sum"))
    return out


def _megatron_note(res: core.VocabCeResult, tp: int) -> dict:
    """What Megatron's K is at this tp, and (when tp does not divide V) the padded logits' value."""
    meg = res.megatron
    if meg.padded_vocab == res.vocab:
        return label("note.vocab_megatron_k", vocab=fmt.integer(res.vocab), tp=fmt.integer(tp),
                     K=fmt.integer(meg.K))
    return label("note.vocab_megatron_pad", vocab=fmt.integer(res.vocab), tp=fmt.integer(tp),
                 padded=fmt.integer(meg.padded_vocab), K=fmt.integer(meg.K), pad=fmt.num(meg.pad_logit))


def _head_tables(head: core.HeadResult) -> tuple[dict, dict]:
    """The output head's inputs (h, W_out, targets) and, per rank, its W_out columns, the local
    gradient of the mean loss and its partial term of ∂L/∂h; foot: their sum over the shards."""
    h, W, n = np.asarray(head.hidden), np.asarray(head.W_out), len(head.target)
    # h and y are replicated on every rank: untinted grids.  Shading: a shard's W_out columns and
    # logit gradient against all shards', a partial dL/dh against the sum.
    inputs = table("cap.vocab_head_inputs", ["col.row_tensor", "col.row_shape", "col.row_value"], [
        ["h", fmt.shape(h.shape), tree.grid(h)],
        # W_out is split by columns: each column tinted by the rank whose vocabulary range holds it.
        ["W_out", fmt.shape(W.shape), tree.grid(W, cols=[next(e.rank for e in head.ranks
                                                               if e.vocab_range[0] <= j < e.vocab_range[1])
                                                          for j in range(W.shape[1])])],
        # token ids are labels, not magnitudes: no shading (scale 0)
        ["y", fmt.shape((n,)), tree.grid(np.asarray(head.target), decimals=0, scale=0)],
    ])
    top_w = tree.scale_of(W)
    top_z = tree.scale_of(*(e.grad_logits for e in head.ranks))
    top_h = tree.scale_of(head.reference.grad_hidden, *(e.grad_hidden_partial for e in head.ranks))
    # the head result lists only the vocabulary range: its padding ids are derived here
    rows = [[tree.rank_tag(e.rank), _range_cell(e.vocab_range, core.rank_padding(head.vocab, *e.vocab_range)[0]),
             tree.grid(e.W_shard, rank=e.rank, scale=top_w),
             tree.grid(e.grad_logits, rank=e.rank, scale=top_z),
             tree.grid(e.grad_hidden_partial, rank=e.rank, scale=top_h)] for e in head.ranks]
    foot = [[label("label.sum_shards"), "—", "—", "—", tree.grid(head.grad_hidden, scale=top_h)],
            [label("label.reference"), "—", "—", "—", tree.grid(head.reference.grad_hidden, scale=top_h)],
            [label("label.max_abs_err"), "—", "—", "—", fmt.err(head.max_abs_err["grad_hidden"])]]
    # the caption and column say which loss the gradients are of: the mean over the n positions
    per_rank = table(label("cap.vocab_hidden", n=fmt.integer(n)),
                     ["col.rank", "col.vocab_range", "col.w_out_shard", label("col.g_logits", n=fmt.integer(n)),
                      "col.g_hidden_partial"], rows, foot)
    return inputs, per_rank


def render_vocab_extras(controls: dict, lang: str) -> dict:
    """Padding rule, label smoothing per rank, ignore_index and the hidden-state gradient."""
    c = parse_controls(SECTIONS["vocab-extras"].controls, controls)
    tp, eps = c["tp"], c["smoothing"]
    smooth = core.default_run(core.DEFAULT_TARGET, tp, label_smoothing=eps)
    s_rows, s_foot = _smoothing_rows(smooth)

    ign = core.run_vocab_ce(IGNORE_LOGITS, IGNORE_TARGETS, shards=tp, ignore_index=IGNORE_INDEX)
    grad = np.asarray(ign.grad)                                        # (N, V)
    ign_rows = []
    # Positions, not ranks: untinted grids, one shading scale per column.
    top_z, top_g = tree.scale_of(IGNORE_LOGITS), tree.scale_of(grad)
    for i, y in enumerate(IGNORE_TARGETS):
        tgt = label("label.ignored", index=fmt.integer(y)) if y == IGNORE_INDEX else fmt.integer(y)
        ign_rows.append([fmt.integer(i), tree.grid(IGNORE_LOGITS[i], scale=top_z), tgt,
                         fmt.num(ign.position_loss[i]), tree.grid(grad[i], scale=top_g)])
    ign_foot = [[label("label.mean_counted", n=fmt.integer(ign.counted)), "—", "—", fmt.num(ign.loss), "—"],
                [label("label.reference"), "—", "—", fmt.num(ign.reference_loss), "—"],
                [label("label.max_abs_err"), "—", "—", fmt.err(ign.abs_diff), fmt.err(ign.grad_max_abs_err)]]

    return {
        "controls": {"tp": str(tp), "smoothing": eps},
        "tables": {
            "vocab-padding": table("cap.vocab_padding", ["col.tp", "col.pad_divisor", "col.padded_vocab",
                                                         "col.padding_ids", "col.per_rank"], _padding_rows(tp)),
            "vocab-smoothing": table("cap.vocab_smoothing", ["col.rank", "col.vocab_range", "col.k_padded",
                                                             "col.sum_shifted", "col.meg_mean_log_p",
                                                             "col.loss_ours", "col.loss_megatron",
                                                             "col.diff_pytorch"], s_rows, s_foot),
            "vocab-ignore": table("cap.vocab_ignore", ["col.position", "col.logits", "col.target",
                                                       "col.position_loss", "col.gradient"], ign_rows, ign_foot),
        },
        "values": {
            "gpt2-vocab": fmt.integer(GPT2_VOCAB),
            "smoothing-loss": fmt.num(smooth.loss),
            "smoothing-reference": fmt.num(smooth.reference_loss),
            "ignore-loss": fmt.num(ign.loss),
        },
        "notes": {"vocab-megatron": _megatron_note(smooth, tp)},
        "figures": {"vocab-extras": figure_vocab_extras(tp, eps, smooth, ign, IGNORE_TARGETS, IGNORE_INDEX,
                                                        core.vocab_pad_table(GPT2_VOCAB, tp), smoothing_terms(smooth))},
    }


def render_vocab_head(controls: dict, lang: str) -> dict:
    """The output layer on its own: its inputs and, per rank, the partial gradient of h."""
    c = parse_controls(SECTIONS["vocab-head"].controls, controls)
    head_inputs, hidden = _head_tables(core.run_vocab_parallel_head(shards=c["tp"]))
    return {"controls": {"tp": str(c["tp"])},
            "tables": {"vocab-head-inputs": head_inputs, "vocab-hidden": hidden}}


SECTIONS = {
    "vocab-ce": Section(
        name="vocab-ce",
        controls=(
            Control("shards", "select", "2", options=int_range(1, V), slider=True),
            Control("target", "select", str(PAGE_TARGET), options=int_range(0, V - 1), slider=True),
            Control("shift", "number", 0, min=-core.SHIFT_LIMIT, max=core.SHIFT_LIMIT, step="any", slider="symlog"),
        ),
        render=render_vocab_ce,
        real=lambda c: [("vocab-ce", {"shards": c["shards"], "target": c["target"], "shift": c["shift"]})],
        tables=("vocab-ranks", "vocab-tokens"),
        values=("global-max", "global-sum-exp", "loss", "reference-loss", "target-rank", "abs-diff",
                "shift-diff", "padded-vocab"),
    ),
    "vocab-extras": Section(
        name="vocab-extras",
        controls=(
            Control("tp", "select", str(EXTRAS_TP), options=int_range(1, V), slider=True),
            Control("smoothing", "number", 0.1, min=0, max=1, step=0.05, slider=True),
        ),
        render=render_vocab_extras,
        real=lambda c: [("vocab-ce", {"shards": c["tp"], "label_smoothing": c["smoothing"]}),
                        ("vocab-ce", {"shards": c["tp"], "logits": IGNORE_LOGITS, "target": IGNORE_TARGETS})],
        tables=("vocab-padding", "vocab-smoothing", "vocab-ignore"),
        values=("gpt2-vocab", "smoothing-loss", "smoothing-reference", "ignore-loss"),
    ),
    # the output layer's gradient has its own block: it is not one of the loss's details above
    "vocab-head": Section(
        name="vocab-head",
        controls=(Control("tp", "select", "2", options=int_range(1, V), slider=True),),
        render=render_vocab_head,
        tables=("vocab-head-inputs", "vocab-hidden"),
    ),
}
