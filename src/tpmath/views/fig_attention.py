"""Figures of page 3 (sections ``attention``, ``layer``, ``qkv-layout``), drawn from the core's result.

``attention``        the heads each rank holds (query heads and the KV heads they read, replicated
                     KV heads shared by their replica group), each rank's attention probabilities as
                     heat grids per local head, the partial outputs of the row-parallel W_o, the
                     AllReduce (f̄) and Y against the reference.  Under a mistake the wrong edges,
                     operators and cells are drawn in the warning style.
``attention-grads``  the backward pass: G_Y replicated, each rank's partial G_X summed by f, and the
                     replicas' partial KV weight gradients summed in their group (K < tp).
``layer``            the pre-LN layer LN → attention → ⊕ → LN → MLP → ⊕ with f and g; the collectives
                     of the chosen pass lit; what every rank computes alike drawn grey.
``qkv-layout``       a fused QKV weight's head blocks in Megatron's per-group order and in Q|K|V order,
                     cut into tp equal column blocks; which ranks get exactly the heads they need.

Heat grids have no numbers (the section's tables hold them); numbers drawn (errors, the
softmax scale) are those of the tables and values.
"""

from __future__ import annotations

import numpy as np

from .. import attention as att
from .. import fmt
from .. import layer as lay
from .draw import (CAP_H as CAP, FLOW_GAP, NARROW_W, PAD, WIDE_W, Cell, Link, Panel, Row, arrow_panel, cell_block, centred, col_boxes,
                   col_groups, col_panels, collective_flow, column, connect, figure, figure_at, flowed, heat_panel, label,
                   lane_badge, note_panel, op_box, rank_name, rows2, span, text_w, words)

HEAT = 16.0          # a cell of a probability heat grid (S × S, up to 6 × 6)
HEAT_Y = 12.0        # a cell of an output / gradient heat grid (S × D, up to 6 × 16)
NOTE_W = NARROW_W - 16       # a line of the figure that must fit a phone drawing


def _err_line(err: float, tol: float):
    """“= reference · err …” or the warning “≠ reference · err …” under a result."""
    if err <= tol:
        return label("fig.matches_ref", err=fmt.err(err)), "dimtext"
    return label("fig.att_off_ref", err=fmt.err(err)), "a-warn"


# ------------------------------------------------------------------------------ head map

HEAD_W, HEAD_H, HEAD_GAP = 38.0, 22.0, 6.0     # a head's box; between two query heads' boxes
EDGE_H = 34.0        # from the query heads down to the KV heads (their edges)
TAG_W, TAG_H = 20.0, 14.0       # a holder's tag under a KV head
HEADS_CAP_W = 64.0   # the rows' names left of the heads


def _head_box(name: str, rank: int | None) -> Panel:
    """A head's box, tinted by the rank that holds it (None: replicated); ports <name>.top / .bottom."""
    # a replicated head takes the replica tint: without a rank its fill would have no colour at all
    cls = "a-hbox" if rank is not None else "a-hbox rep"
    return cell_block([Cell(cls, name, rank, "a-ht", name=name)], 1, HEAD_W, HEAD_H)


def _kv_box(k: int, who: list[int]) -> Panel:
    """A KV head's box over one tag per rank that holds it (replicas side by side, tinted by rank)."""
    tags = cell_block([Cell("badge", rank_name(r), r, "a-tag") for r in who], len(who), TAG_W, TAG_H)
    return column([_head_box(f"k{k}", who[0] if len(who) == 1 else None), tags], centred=True)


def _named(key: str, row: Panel) -> Panel:
    return flowed([[centred(label(key), HEAD_H, "cap", w=HEADS_CAP_W), row]], WIDE_W, gap=0)


def head_map(res: att.AttentionResult, cfg: att.Config) -> Panel:
    """Query heads on top, KV heads below, an edge from each query head to the KV head its rank
    holds for it; the holders of each KV head under it (a replica group when K < tp)."""
    H, K = cfg.heads, cfg.kv_heads
    owner_q = {h: rk.rank for rk in res.ranks for h in rk.q_heads}
    holders: dict[int, list[int]] = {}
    for rk in res.ranks:
        for k in rk.kv_heads:
            holders.setdefault(k, []).append(rk.rank)
    groups, _ = col_groups([[HEAD_W + HEAD_GAP]] * H, [owner_q[h] for h in range(H)], 0.0)
    cols = [c for g in groups for c in g]
    per_kv = H // K                 # a KV head under the query heads of its group
    queries = col_panels(cols, [_head_box(f"q{h}", owner_q[h]) for h in range(H)])
    kvs = col_panels([span(cols[k * per_kv:(k + 1) * per_kv]) for k in range(K)],
                     [_kv_box(k, holders.get(k, [])) for k in range(K)])
    body = column([_named("fig.att_q_heads", queries), Panel(queries.w, EDGE_H), _named("fig.att_kv_heads", kvs)], gap=0)
    edges, wrong = [], []
    for rk in res.ranks:
        per = len(rk.q_heads) // len(rk.kv_heads)
        for j, h in enumerate(rk.q_heads):
            got = rk.kv_heads[j // per]
            ok = got == att.kv_head_of(h, H, K)
            (edges if ok else wrong).append(Link("arrow", (f"q{h}.bottom", f"k{got}.top"),
                                                 "a-edge" if ok else "a-edge a-bad", None))
    return Panel(body.w, body.h, body.nodes + connect(edges + wrong, body.ports), part="heads")   # wrong edges on top


# ------------------------------------------------------------------------------ attention

def _enter_row(res: att.AttentionResult, cfg: att.Config) -> list[Panel]:
    """X on every rank, then the operator in front of the QKV projections (f, or f̄ by mistake)."""
    X = res.inputs["X"]
    x = heat_panel(X, label("fig.att_x"), None, "X", HEAT_Y)
    if cfg.mistake == "f-and-g-swapped":
        box = op_box(label("fig.att_g_in_bad"), label("fig.att_times_tp", tp=fmt.integer(cfg.tp)),
                     150, "a-warnbox", "enter")
    else:
        box = op_box(label("fig.att_f_in"), label("fig.att_identity"), 180, "coll dim", "enter")
    return [x, arrow_panel(None, w=30, h=44, part="into"), box]


def _lane(rk: att.AttentionRank, res: att.AttentionResult, one: att.AttentionResult, cfg: att.Config,
          yscale: float) -> Row:
    r = rk.rank
    ref_p = one.ranks[0].probs
    panels = []
    per = len(rk.q_heads) // len(rk.kv_heads)
    for j, h in enumerate(rk.q_heads):
        got = rk.kv_heads[j // per]
        P = rk.probs[:, j]
        bad = np.abs(P - ref_p[:, h]) > 1e-12
        wrong = bool(bad.any())
        misread = got != att.kv_head_of(h, cfg.heads, cfg.kv_heads)
        under = (label("fig.att_reads", k="k" + fmt.integer(got)), "a-warn" if misread else "dimtext")
        masked = ~np.tri(cfg.seq, dtype=bool) if cfg.causal else None      # keys after the query
        panels.append(heat_panel(P, "P · q" + fmt.integer(h), r, f"P.{r}.{h}", HEAT, 1.0,
                                 bad=rows2(bad) if wrong else None, under=under[0], under_cls=under[1], min_w=52,
                                 masked=masked))
    Yp = rk.Y_partial
    panels += [arrow_panel("·Wₒ,ᵣ", w=58, h=2 * HEAT * cfg.seq / 2 + CAP),
               heat_panel(Yp, label("fig.partial_of", name="Yᵣ"), r, f"Yp.{r}", HEAT_Y, yscale,
                          under=_shape(Yp))]
    h = max(p.h for p in panels)
    return Row([lane_badge(r, h, "heat")] + panels, rank=r, hang=True)


def _shape(a) -> str:
    return "×".join(fmt.integer(s) for s in np.shape(rows2(a)))


def _allreduce(op: str, tp: int, part: str) -> Panel:
    """The AllReduce ``op`` (f̄ forward, f backward) as movement: every rank's partial by an arrow in
    its tint into the sum, the sum out to every rank (one rank: nothing moves, the box is grey)."""
    sub = label("fig.sum_ranks", last=rank_name(tp - 1)) if tp > 1 else label("fig.att_one_rank")
    return collective_flow("allreduce", tp, label("fig.allreduce_op", op=op), sub, part=part,
                           cls="coll hl" if tp > 1 else "coll dim")


def _into(box: Panel) -> Panel:
    """The arrow from an operator to the result beside it, level with the operator's middle."""
    return arrow_panel(None, w=30, h=box.h - 12, part="into")


def _at(rows: list):
    """The figure's rows for a drawing ``max_w`` wide: an operator, its arrow and its result on one
    line where they fit, else the result under the operator (the collective's arrows lead to it)."""
    def rows_at(max_w: float) -> list:
        out = []
        for row in rows:
            into = isinstance(row, list) and len(row) > 2 and row[1].part == "into"
            if into and sum(p.w for p in row) + (len(row) - 1) * FLOW_GAP > max_w - 2 * PAD:
                out += [[row[0]], row[2:]]
            else:
                out.append(row)
        return out
    return rows_at


def _leave_row(res: att.AttentionResult, cfg: att.Config, yscale: float) -> list[Panel]:
    """The operator after W_o (f̄, or f by mistake) and Y on every rank against the reference."""
    if cfg.mistake == "f-and-g-swapped":
        box = op_box(label("fig.att_f_out_bad"), label("fig.att_never_summed"), 180, "a-warnbox", "leave")
    else:
        box = _allreduce("f̄", cfg.tp, "leave")
    Y, ref = res.sharded.Y, res.reference.Y
    err, tol = res.max_abs_err["Y"], res.tolerances["Y"]
    bad = np.abs(rows2(Y) - rows2(ref)) > tol
    line, cls = _err_line(err, tol)
    y = heat_panel(Y, label("fig.every_rank", name="Y"), None, "Y", HEAT_Y, yscale,
                   bad=bad if bad.any() else None, under=line, under_cls=cls, min_w=max(150, text_w(line, cls)))
    return [box, _into(box), y]


def _scale_row(res: att.AttentionResult, cfg: att.Config) -> list[Panel]:
    """Under scale-local-width: the scale each rank used against 1/√E."""
    return [words(label("fig.att_scale_bad", s=fmt.num(res.config["scale"])), NOTE_W, "a-warn")]


def figure_attention(res: att.AttentionResult, one: att.AttentionResult, cfg: att.Config) -> dict:
    """The ``attention`` figure: heads per rank, attention per local head, W_o partials, f̄, Y."""
    yscale = float(np.max(np.abs(res.reference.Y))) or 1.0

    def rows():
        out = [[head_map(res, cfg)], _enter_row(res, cfg)]
        if cfg.mistake == "scale-local-width":
            out.append(_scale_row(res, cfg))
        out += [_lane(rk, res, one, cfg, yscale) for rk in res.ranks]
        out.append(_leave_row(res, cfg, yscale))
        return out

    title = label("fig.att_title", tp=fmt.integer(cfg.tp), h=fmt.integer(cfg.heads), k=fmt.integer(cfg.kv_heads),
                  mistake=label(f"opt.mistake.{cfg.mistake.replace('-', '_')}"))
    built = rows()                         # flow only places panels: both layouts can share them
    return figure_at("attention", title, _at(built), caption=label("fig.att_caption"))


def figure_attention_grads(res: att.AttentionResult, cfg: att.Config) -> dict:
    """The backward pass: replicated G_Y, partial G_X per rank and f, the KV replicas' gradient sum."""
    G = res.ranks[0].G_Y
    gscale = float(np.max(np.abs(res.reference.G_X))) or 1.0
    kscale = float(np.max(np.abs(res.reference.G_W_k))) or 1.0
    swapped = cfg.mistake == "f-and-g-swapped"
    replicated = cfg.kv_heads < cfg.tp

    def rows():
        gy_line = (label("fig.att_gy_times_tp", tp=fmt.integer(cfg.tp)), "a-warn") if swapped \
            else (label("fig.att_gy_once"), "dimtext")
        out = [[heat_panel(G, label("fig.att_gy"), None, "G_Y", HEAT_Y, None, under=gy_line[0],
                           under_cls=gy_line[1], min_w=max(150, text_w(*gy_line)))]]
        for rk in res.ranks:
            r = rk.rank
            panels = [heat_panel(rk.G_X_partial, label("fig.partial_of", name="G_Xᵣ"), r,
                                 f"GXp.{r}", HEAT_Y, gscale)]
            if replicated:      # its caption is wider than the grid: the panel holds it
                caption = label("fig.partial_of", name="G_W_kᵣᵀ")
                panels.append(heat_panel(np.asarray(rk.G_W_k_partial).T, caption, r, f"GWkp.{r}",
                                         HEAT_Y, kscale, min_w=text_w(caption, "cap")))
            h = max(p.h for p in panels)
            out.append(Row([lane_badge(r, h, "heat")] + panels, rank=r, hang=True))
        out.append(_gx_merge(res, cfg, swapped, gscale))
        if replicated:
            out.append(_kv_merge(res, cfg, kscale))
        return out

    title = label("fig.att_grads_title", tp=fmt.integer(cfg.tp))
    built = rows()
    return figure_at("attention-grads", title, _at(built), caption=label("fig.att_grads_caption"))


def _gx_merge(res: att.AttentionResult, cfg: att.Config, swapped: bool, gscale: float) -> list[Panel]:
    if swapped:
        box = op_box(label("fig.att_g_back_bad"), label("fig.att_never_summed"), 180, "a-warnbox", "f-back")
    else:
        box = _allreduce("f", cfg.tp, "f-back")
    GX, ref = res.sharded.G_X, res.reference.G_X
    err, tol = res.max_abs_err["G_X"], res.tolerances["G_X"]
    bad = np.abs(rows2(GX) - rows2(ref)) > tol
    line, cls = _err_line(err, tol)
    return [box, _into(box),
            heat_panel(GX, label("fig.every_rank", name="G_X"), None, "G_X", HEAT_Y, gscale,
                       bad=bad if bad.any() else None, under=line, under_cls=cls, min_w=max(150, text_w(line, cls)))]


def _kv_merge(res: att.AttentionResult, cfg: att.Config, kscale: float) -> list[Panel]:
    groups = att.kv_groups([rk.kv_heads for rk in res.ranks])
    names = " ".join("{" + ",".join(rank_name(r) for r in g) + "}" for g in groups)
    if cfg.mistake == "kv-grad-not-summed":
        box = op_box(label("fig.att_kv_not_summed"), names, 210, "a-warnbox", "kv-sum")
    else:
        box = op_box(label("fig.att_kv_sum"), names, 210, "coll hl", "kv-sum")
    GK, ref = res.sharded.G_W_k, res.reference.G_W_k
    err, tol = res.max_abs_err["G_W_k"], res.tolerances["G_W_k"]
    bad = np.abs(GK - ref).T > tol
    line, cls = _err_line(err, tol)
    spread = res.replica_spread["G_W_k"]
    panels = [box, _into(box),
              heat_panel(np.asarray(GK).T, label("fig.att_gwk"), None, "G_W_k", HEAT_Y, kscale,
                         bad=bad if bad.any() else None, under=line, under_cls=cls, min_w=max(150, text_w(line, cls)))]
    if spread > 0:
        worst = max(spread, res.replica_spread["G_W_v"])
        panels.append(words(label("fig.att_replicas_differ", spread=fmt.err(worst)), NOTE_W, "a-warn"))
    return panels


# ----------------------------------------------------------------------------------- layer

def _range(ids) -> str:
    ids = list(ids)
    if len(ids) == 1:
        return fmt.integer(ids[0])
    return f"{fmt.integer(ids[0])}–{fmt.integer(ids[-1])}"


# One row of the layer, as compact as a phone column needs (the desktop drawing has the active
# AllReduce beside it, the phone one under it): each part's width.
SYM_W, BOX_W, OP_W, STACK_W, ADD_W = 10.0, 28.0, 18.0, 76.0, 20.0
BOX_H, OP_H, SLOT_H = 26.0, 22.0, 18.0     # LN and bias boxes, f and f̄, a rank's box of the stack
LINK_GAP = 8.0      # the arrow between two parts of the row
SKIP_ROOM = 14.0    # above the row: the residual's way round the block
# the operator boxes' keys (data-part names) and the letters shown in them (Korthikanti et al.'s)
_OP_SYMBOL = {"f": "f", "g": "f̄"}


def figure_layer(res: lay.LayerResult, cfg: att.Config, direction: str) -> dict:
    """The pre-LN layer: two blocks, f and f̄, rank stacks, and the pass's AllReduce of each block
    as movement (f̄ forward, f backward)."""
    fwd = direction == "forward"
    title = label("fig.layer_title", tp=fmt.integer(cfg.tp), **{"pass": label(f"opt.pass.{direction}")})
    attn = [f"q{_range(rk.q_heads)} · k{_range(rk.kv_heads)}" for rk in res.ranks]
    mlp = [f"F {_range(range(*rk.ffn_cols))}" for rk in res.ranks]
    rows = [[words(label("fig.layer_fwd" if fwd else "fig.layer_bwd"), NOTE_W, "stage-name")]]
    for i, (ln, stack, bias, name_in, name_out, part) in enumerate((
            ("LN₁", attn, "+b_o", "X", "U", "attn"), ("LN₂", mlp, "+b₂", "U", "Y", "mlp"))):
        caption = label("fig.layer_attn" if i == 0 else "fig.layer_mlp", f=fmt.integer(res.config["ffn"]))
        active = "g" if fwd else "f"
        rows.append([column([words(caption, NOTE_W, "cap"), _block(ln, stack, bias, name_in, name_out, part, fwd)],
                            part=part),
                     _allreduce(_OP_SYMBOL[active], cfg.tp, f"{part}-{active}-flow")])
    rows += [[words(label("fig.layer_grey"), NOTE_W)], [words(label("fig.layer_count"), NOTE_W)]]
    return figure("layer", title, lambda: rows, caption=label("fig.layer_caption"))


def _mid(p: Panel, h: float) -> Panel:
    """``p`` with its middle at the middle of a row ``h`` high (the row's arrows meet it there)."""
    return column([Panel(p.w, (h - p.h) / 2), p], gap=0)


def _box(part: str, cell, cls: str, w: float, h: float, text_cls: str = "a-ht", name: str | None = None) -> Panel:
    return cell_block([Cell(cls, cell, text_cls=text_cls, name=name)], 1, w, h, part=part)


def _block(ln: str, stack: list, bias: str, name_in: str, name_out: str, part: str, fwd: bool) -> Panel:
    """One row: in → LN → f → rank stack → f̄ → +b → ⊕ → out, with the residual skip above; forward
    the arrows point right, backward the gradients flow left."""
    row_h = max(BOX_H, len(stack) * SLOT_H)
    parts = [_box(f"{part}-in", name_in, None, SYM_W, row_h, "a-sym"), _mid(_box(f"{part}-ln", ln, "a-repbox rep", BOX_W, BOX_H), row_h)]
    for key in ("f", "g"):
        if key == "g":                                      # the parallel region: one box per rank
            parts.append(_mid(cell_block([Cell("a-hbox", rank_name(r) + " " + s, r, "a-tag") for r, s in enumerate(stack)],
                                         1, STACK_W, SLOT_H, part=f"{part}-stack"), row_h))
        active = (key == "g") == fwd                        # which operator communicates in this pass
        op = _box(f"{part}-{key}-op", _OP_SYMBOL[key], "coll hl" if active else "coll dim", OP_W, OP_H, "coll-t",
                  name=f"{part}-{key}")
        parts.append(column([_mid(op, row_h), words(label("fig.layer_ar" if active else "fig.layer_id"), OP_W,
                                                    "a-small" if active else "a-small dimtext", "middle")], gap=2))
    parts += [_mid(_box(f"{part}-b", bias, "a-repbox rep", BOX_W, BOX_H), row_h),
              _mid(_box(f"{part}-plus", "+", "a-repbox rep", ADD_W, ADD_W, name=f"{part}-add"), row_h),
              _box(f"{part}-out", name_out, None, SYM_W, row_h, "a-sym")]
    chain = flowed([parts], WIDE_W, gap=LINK_GAP)
    names = ("in", "ln", "f-op", "stack", "g-op", "b", "plus", "out")
    links = []
    for a, b in zip(names, names[1:]):
        ends = (f"{part}-{a}.right", f"{part}-{b}.left")
        links.append(Link("arrow", ends if fwd else ends[::-1], gap=1))
    skip = (f"{part}-in.right", f"{part}-add.top")                  # the residual skips the block
    links.append(Link("over", skip if fwd else skip[::-1], track=(row_h - ADD_W) / 2 + SKIP_ROOM / 2))
    return column([Panel(chain.w, SKIP_ROOM), Panel(chain.w, chain.h, chain.nodes + connect(links, chain.ports))], gap=0)


# ------------------------------------------------------------------------------ qkv-layout

BLOCK = 26.0
PER_LINE = int(NOTE_W // BLOCK)     # head blocks per line: the drawing is a phone column wide
QKV_H, SPAN_H = 22.0, 14.0          # a head block; the rank span under a line of blocks


def _line(blocks: list, first: int, E: int, rank_of) -> Panel:
    """One line of head blocks from block ``first``: each block's columns tinted by the rank that gets
    them (under the block's frame and name)."""
    cells = cell_block([Cell("cell v2", rank=rank_of(g)) for g in range(first * E, (first + len(blocks)) * E)],
                       len(blocks) * E, BLOCK / E, QKV_H)
    frames = cell_block([Cell(f"a-qkv a-{part}", f"{part}{fmt.integer(h)}", text_cls="a-ht") for part, h in blocks],
                        len(blocks), BLOCK, QKV_H)
    return Panel(frames.w, frames.h, cells.nodes + frames.nodes)


def _spans(split: dict, first: int, count: int, E: int) -> Panel:
    """Under a line of blocks, each rank's span of it, named with ✓ / ✗ where the rank's columns start."""
    per = split["columns_per_rank"]
    lo, hi = first * E, (first + count) * E
    runs = [(rk, max(lo, rk["rank"] * per), min(hi, (rk["rank"] + 1) * per)) for rk in split["ranks"]]
    runs = [(rk, a, b) for rk, a, b in runs if b > a]
    _, cols = col_groups([[(b - a) * BLOCK / E] for _, a, b in runs], [rk["rank"] for rk, _, _ in runs], 0.0)
    marks = [(rank_name(rk["rank"]) + (" ✓" if rk["usable"] else " ✗") if a == rk["rank"] * per else "",
              "a-ok" if rk["usable"] else "a-warn", None) for rk, a, _ in runs]
    return col_boxes(cols, marks, "a-hbox", inset=1.0, h=SPAN_H)


def _bar(split: dict, cfg: att.Config, E: int, caption: list) -> Panel:
    """One layout: its head blocks (wrapped at PER_LINE), each column tinted by the rank that gets it."""
    blocks = att.qkv_blocks(cfg.heads, cfg.kv_heads, split["layout"])
    per = split["columns_per_rank"]
    def rank_of(g: int):
        return int(g // per) if split["ranks"] is not None else None
    lines = []
    for first in range(0, len(blocks), PER_LINE):
        run = blocks[first:first + PER_LINE]
        lines.append(_line(run, first, E, rank_of))
        if split["ranks"] is not None:
            lines.append(_spans(split, first, len(run), E))
    if split["ranks"] is None:
        lines.append(words(label("fig.qkv_uneven"), NOTE_W, "a-warn"))
    return column([words(caption, NOTE_W, "cap")] + lines, part=split["layout"])


def figure_qkv(splits: dict, cfg: att.Config, E: int) -> dict:
    """Both layouts of the fused QKV weight cut into tp equal column blocks; one drawing for every
    screen (the blocks wrap at PER_LINE)."""
    captions = {"megatron": [label(f"fig.qkv_megatron_{i}") for i in (1, 2, 3)],
                "concatenated": [label("fig.qkv_concat")]}
    rows = [[_bar(splits[layout], cfg, E, caption)] for layout, caption in captions.items()]
    title = label("fig.qkv_title", tp=fmt.integer(cfg.tp), h=fmt.integer(cfg.heads),
                  k=fmt.integer(cfg.kv_heads))
    return figure("qkv-layout", title, lambda: rows)
