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
from .cells import label, rank as rank_name
from .tree import NARROW_W, Panel, Row, arrow_head, arrow_panel, check, el, figure, figure_svg, n, rank_attrs, shades, text

HEAT = 16.0          # a cell of a probability heat grid (S × S, up to 6 × 6)
HEAT_Y = 12.0        # a cell of an output / gradient heat grid (S × D, up to 6 × 16)
CAP = 16.0           # caption line above a grid


def _rows2(a) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(-1, a.shape[-1]) if a.ndim > 2 else a.reshape(1, -1) if a.ndim < 2 else a


def heat(m, rank: int | None, cell: float, scale: float | None = None, bad=None, masked=None) -> tuple[list, float, float]:
    """A matrix as shaded cells without numbers (a heat grid); ``bad`` marks cells off the reference,
    ``masked`` cells a causal mask removed (drawn empty)."""
    a = _rows2(m)
    level = shades(a, scale)
    kids = []
    for (i, j), v in np.ndenumerate(level):
        cls = "cell a-masked" if masked is not None and masked[i, j] else f"cell v{int(v)}"
        kids.append(el("rect", {**rank_attrs(rank, cls), "x": n(j * cell), "y": n(i * cell),
                                "width": n(cell), "height": n(cell)}))
    if bad is not None:
        for i, j in zip(*np.nonzero(bad)):
            kids.append(el("rect", {"class": "a-badcell", "x": n(j * cell + 1), "y": n(i * cell + 1),
                                    "width": n(cell - 2), "height": n(cell - 2)}))
    w, h = a.shape[1] * cell, a.shape[0] * cell
    kids.append(el("rect", {**rank_attrs(rank, "frame"), "x": "0", "y": "0", "width": n(w), "height": n(h)}))
    return [el("g", {"class": "heat"}, kids)], w, h     # heat: numberless cells (style.css)


def heat_panel(m, caption, rank: int | None, key: str, cell: float, scale=None, bad=None, under=None,
               under_cls: str = "dimtext", min_w: float = 0.0, masked=None) -> Panel:
    nodes, w, h = heat(m, rank, cell, scale, bad, masked)
    out = [text(0, CAP - 5, caption, "cap"), el("g", {"transform": f"translate(0,{n(CAP)})"}, nodes)]
    height = CAP + h
    if under is not None:
        out.append(text(0, height + 13, under, under_cls))
        height += 17
    return Panel(max(w, min_w), height, out, part=key)


def badge(r: int, h: float) -> Panel:
    """The lane's rank label (colour is never the only cue)."""
    y = max(CAP, h / 2 - 11)
    return Panel(36, h, [el("rect", {**rank_attrs(r, "badge"), "x": "0", "y": n(y), "width": "34", "height": "22",
                                     "rx": "4"}),
                         text(17, y + 11, rank_name(r), "badge-t", "middle", **{"dominant-baseline": "central"})],
                 part=f"rank{r}")


def op_box(title, sub, w: float, cls: str, part: str) -> Panel:
    """A collective / operator box: its name and what it does (cls: "coll hl", "coll dim", "a-warnbox")."""
    h = 44.0
    return Panel(w, h + 6, [
        el("rect", {"class": cls, "x": "0", "y": "6", "width": n(w), "height": n(h), "rx": "6"}),
        text(w / 2, 6 + 18, title, "coll-t", "middle"),
        text(w / 2, 6 + 34, sub, "coll-s", "middle"),
    ], part=part)


def _err_line(err: float, tol: float):
    """“= reference · err …” or the warning “≠ reference · err …” under a result."""
    if err <= tol:
        return label("fig.matches_ref", err=fmt.err(err)), "dimtext"
    return label("fig.att_off_ref", err=fmt.err(err)), "a-warn"


# ------------------------------------------------------------------------------ head map

def head_map(res: att.AttentionResult, cfg: att.Config) -> Panel:
    """Query heads on top, KV heads below, an edge from each query head to the KV head its rank
    holds for it; the holders of each KV head under it (a replica group when K < tp)."""
    H, K = cfg.heads, cfg.kv_heads
    bw, gap = 38.0, 6.0
    step = bw + gap
    x0, yq, yk = 64.0, CAP + 4, CAP + 4 + 22 + 34
    owner_q = {h: rk.rank for rk in res.ranks for h in rk.q_heads}
    holders: dict[int, list[int]] = {}
    for rk in res.ranks:
        for k in rk.kv_heads:
            holders.setdefault(k, []).append(rk.rank)
    group = H // K
    kx = {k: x0 + (k * group + (group - 1) / 2) * step for k in range(K)}     # KV box left edge
    nodes = [text(0, yq + 15, label("fig.att_q_heads"), "cap"), text(0, yk + 15, label("fig.att_kv_heads"), "cap")]
    edges, wrong = [], []
    for rk in res.ranks:
        per = len(rk.q_heads) // len(rk.kv_heads)
        for j, h in enumerate(rk.q_heads):
            got = rk.kv_heads[j // per]
            ok = got == att.kv_head_of(h, H, K)
            line = el("line", {"class": "a-edge" if ok else "a-edge a-bad", "x1": n(x0 + h * step + bw / 2),
                               "y1": n(yq + 22), "x2": n(kx[got] + bw / 2), "y2": n(yk)})
            (edges if ok else wrong).append(line)
    nodes += edges + wrong                          # wrong edges on top
    for h in range(H):
        x = x0 + h * step
        nodes.append(el("rect", {**rank_attrs(owner_q[h], "a-hbox"), "x": n(x), "y": n(yq), "width": n(bw),
                                 "height": "22", "rx": "3"}))
        nodes.append(text(x + bw / 2, yq + 11, "q" + fmt.integer(h), "a-ht", "middle", **{"dominant-baseline": "central"}))
    y_tags = yk + 22 + 4
    for k in range(K):
        who = holders.get(k, [])
        x = kx[k]
        one = len(who) == 1
        nodes.append(el("rect", {**rank_attrs(who[0] if one else None, "a-hbox"), "x": n(x), "y": n(yk),
                                 "width": n(bw), "height": "22", "rx": "3"}))
        nodes.append(text(x + bw / 2, yk + 11, "k" + fmt.integer(k), "a-ht", "middle", **{"dominant-baseline": "central"}))
        # who holds it: one tag per rank (replicas side by side, tinted by rank)
        tw = 22.0
        left = x + bw / 2 - len(who) * tw / 2
        for i, r in enumerate(who):
            nodes.append(el("rect", {**rank_attrs(r, "badge"), "x": n(left + i * tw + 1), "y": n(y_tags),
                                     "width": n(tw - 2), "height": "14", "rx": "3"}))
            nodes.append(text(left + i * tw + tw / 2, y_tags + 7, rank_name(r), "a-tag", "middle",
                              **{"dominant-baseline": "central"}))
    width = x0 + max(H * step, max(kx.values()) - x0 + bw + max(len(v) for v in holders.values()) * 11) + 4
    return Panel(width, y_tags + 18, nodes, part="heads")


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
    return [x, arrow_panel(None, w=30, h=44), box]


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
                                 bad=_rows2(bad) if wrong else None, under=under[0], under_cls=under[1], min_w=52,
                                 masked=masked))
    Yp = rk.Y_partial
    panels += [arrow_panel("·W_o,ᵣ", w=58, h=2 * HEAT * cfg.seq / 2 + CAP),
               heat_panel(Yp, label("fig.partial_of", name="Yᵣ"), r, f"Yp.{r}", HEAT_Y, yscale,
                          under=_shape(Yp))]
    h = max(p.h for p in panels)
    return Row([badge(r, h)] + panels, rank=r, hang=True)


def _shape(a) -> str:
    return "×".join(fmt.integer(s) for s in np.shape(_rows2(a)))


def _leave_row(res: att.AttentionResult, cfg: att.Config, yscale: float) -> list[Panel]:
    """The operator after W_o (g, or f by mistake) and Y on every rank against the reference."""
    if cfg.mistake == "f-and-g-swapped":
        box = op_box(label("fig.att_f_out_bad"), label("fig.att_never_summed"), 180, "a-warnbox", "leave")
    elif cfg.tp == 1:
        box = op_box(label("fig.allreduce_op", op="f̄"), label("fig.att_one_rank"), 150,
                     "coll dim", "leave")
    else:
        box = op_box(label("fig.allreduce_op", op="f̄"),
                     label("fig.sum_ranks", last=rank_name(cfg.tp - 1)), 150, "coll hl", "leave")
    Y, ref = res.sharded.Y, res.reference.Y
    err, tol = res.max_abs_err["Y"], res.tolerances["Y"]
    bad = np.abs(_rows2(Y) - _rows2(ref)) > tol
    line, cls = _err_line(err, tol)
    y = heat_panel(Y, label("fig.every_rank", name="Y"), None, "Y", HEAT_Y, yscale,
                   bad=bad if bad.any() else None, under=line, under_cls=cls, min_w=150)
    return [box, arrow_panel(None, w=30, h=44), y]


def _scale_row(res: att.AttentionResult, cfg: att.Config) -> list[Panel]:
    """Under scale-local-width: the scale each rank used against 1/√E."""
    s = res.config["scale"]
    return [Panel(300, 20, [text(0, 14, label("fig.att_scale_bad", s=fmt.num(s)), "a-warn")],
                  part="scale")]


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
    built = rows()                         # flow only wraps panels: both layouts can share them
    return figure("attention", title, lambda: built, caption=label("fig.att_caption"))


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
                           under_cls=gy_line[1], min_w=150)]]
        for rk in res.ranks:
            r = rk.rank
            panels = [heat_panel(rk.G_X_partial, label("fig.partial_of", name="G_Xᵣ"), r,
                                 f"GXp.{r}", HEAT_Y, gscale)]
            if replicated:
                panels.append(heat_panel(np.asarray(rk.G_W_k_partial).T,
                                         label("fig.partial_of", name="G_W_kᵣᵀ"), r, f"GWkp.{r}",
                                         HEAT_Y, kscale))
            h = max(p.h for p in panels)
            out.append(Row([badge(r, h)] + panels, rank=r, hang=True))
        out.append(_gx_merge(res, cfg, swapped, gscale))
        if replicated:
            out.append(_kv_merge(res, cfg, kscale))
        return out

    title = label("fig.att_grads_title", tp=fmt.integer(cfg.tp))
    built = rows()
    return figure("attention-grads", title, lambda: built, caption=label("fig.att_grads_caption"))


def _gx_merge(res: att.AttentionResult, cfg: att.Config, swapped: bool, gscale: float) -> list[Panel]:
    if swapped:
        box = op_box(label("fig.att_g_back_bad"), label("fig.att_never_summed"), 180, "a-warnbox", "f-back")
    elif cfg.tp == 1:
        box = op_box(label("fig.allreduce_op", op="f"), label("fig.att_one_rank"), 150, "coll dim",
                     "f-back")
    else:
        box = op_box(label("fig.allreduce_op", op="f"),
                     label("fig.sum_ranks", last=rank_name(cfg.tp - 1)), 150, "coll hl",
                     "f-back")
    GX, ref = res.sharded.G_X, res.reference.G_X
    err, tol = res.max_abs_err["G_X"], res.tolerances["G_X"]
    bad = np.abs(_rows2(GX) - _rows2(ref)) > tol
    line, cls = _err_line(err, tol)
    return [box, arrow_panel(None, w=30, h=44),
            heat_panel(GX, label("fig.every_rank", name="G_X"), None, "G_X", HEAT_Y, gscale,
                       bad=bad if bad.any() else None, under=line, under_cls=cls, min_w=150)]


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
    panels = [box, arrow_panel(None, w=30, h=44),
              heat_panel(np.asarray(GK).T, label("fig.att_gwk"), None, "G_W_k", HEAT_Y, kscale,
                         bad=bad if bad.any() else None, under=line, under_cls=cls, min_w=150)]
    if spread > 0:
        worst = max(spread, res.replica_spread["G_W_v"])
        panels.append(Panel(200, 30, [text(0, 22, label("fig.att_replicas_differ", spread=fmt.err(worst)), "a-warn")],
                            part="spread"))
    return panels


# ----------------------------------------------------------------------------------- layer

def _range(ids) -> str:
    ids = list(ids)
    if len(ids) == 1:
        return fmt.integer(ids[0])
    return f"{fmt.integer(ids[0])}–{fmt.integer(ids[-1])}"


LAYER_NARROW, LAYER_WIDE = 376.0, 600.0


def figure_layer(res: lay.LayerResult, cfg: att.Config, direction: str) -> dict:
    """The pre-LN layer: two blocks, f and f̄, rank stacks; a desktop and a phone drawing."""
    title = label("fig.layer_title", tp=fmt.integer(cfg.tp), **{"pass": label(f"opt.pass.{direction}")})
    svgs = []
    for width, cls in ((LAYER_WIDE, "fig-wide"), (LAYER_NARROW, "fig-narrow")):
        nodes, height = _layer_nodes(res, cfg, direction == "forward", width / LAYER_NARROW)
        svgs.append(figure_svg(title, nodes, width, height, cls=cls))
    node = el("figure", {"class": "tp-figure", "data-figure": "layer"},
              svgs + [el("figcaption", None, text=label("fig.layer_caption"))])
    check(node)
    return node


def _layer_nodes(res: lay.LayerResult, cfg: att.Config, fwd: bool, k: float) -> tuple[list, float]:
    tp, F = cfg.tp, res.config["ffn"]
    attn = [f"q{_range(rk.q_heads)} · k{_range(rk.kv_heads)}" for rk in res.ranks]
    mlp = [f"F {_range(range(*rk.ffn_cols))}" for rk in res.ranks]
    nodes, y = [text(4, 18, label("fig.layer_fwd" if fwd else "fig.layer_bwd"), "stage-name")], 34.0
    block_h = max(44.0, tp * 20.0 + 8)
    for i, (ln, stack, bias, name_in, name_out, part) in enumerate((
            ("LN₁", attn, "+b_o", "X", "U", "attn"), ("LN₂", mlp, "+b₂", "U", "Y", "mlp"))):
        caption = label("fig.layer_attn" if i == 0 else "fig.layer_mlp", f=fmt.integer(F))
        nodes += _block(y, block_h, ln, stack, bias, name_in, name_out, part, tp, fwd, caption, k)
        y += 22 + block_h + 20 + 18            # caption, the row, the f/g labels under it, a gap
    nodes.append(text(4, y, label("fig.layer_grey"), "dimtext"))
    nodes.append(text(4, y + 16, label("fig.layer_count"), "dimtext"))
    return nodes, y + 24


# x positions (left edges) on the 376-wide phone drawing; the desktop one stretches them by k
_X = {"in": 4, "ln": 34, "f": 84, "stack": 118, "g": 232, "b": 266, "add": 318, "out": 344}
# the operator boxes' keys (x positions, data-part names) and the letters shown in them (Korthikanti et al.'s)
_OP_SYMBOL = {"f": "f", "g": "f̄"}
_ARROWS = ((24, "ln"), (70, "f"), (104, "stack"), (218, "g"), (252, "b"), (302, "add"), (328, "out"))


def _block(y0: float, h: float, ln: str, stack: list, bias: str, name_in: str, name_out: str, part: str,
           tp: int, fwd: bool, caption, k: float) -> list:
    """One row: in → LN → f → rank stack → f̄ → +b → ⊕ → out, with the residual skip above."""
    top = y0 + 22
    mid = top + h / 2
    x = {key: v * k for key, v in _X.items()}
    box = 36 * k                                        # LN and bias boxes
    nodes = [text(4, y0 + 12, caption, "cap"), text(x["in"], mid + 4, name_in, "a-sym")]
    # forward: arrows point right; backward: the gradients flow left
    for start, dest in _ARROWS:
        x1, x2 = start * k, x[dest] - 2
        nodes.append(el("line", {"class": "arrow", "x1": n(x1), "y1": n(mid), "x2": n(x2), "y2": n(mid)}))
        nodes.append(arrow_head(x2, mid, 0) if fwd else arrow_head(x1, mid, 180))
    for key, label_ in (("ln", ln), ("b", bias)):               # replicated: every rank computes them alike
        nodes.append(el("rect", {"class": "a-repbox rep", "x": n(x[key]), "y": n(mid - 13), "width": n(box),
                                 "height": "26", "rx": "4"}))
        nodes.append(text(x[key] + box / 2, mid, label_, "a-ht", "middle", **{"dominant-baseline": "central"}))
    add = x["add"]
    nodes.append(el("circle", {"class": "a-repbox rep", "cx": n(add), "cy": n(mid), "r": "10"}))
    nodes.append(text(add, mid, "+", "a-ht", "middle", **{"dominant-baseline": "central"}))
    skip_x, skip_y = 28 * k, top - 4                            # the residual skips the block
    nodes.append(el("path", {"class": "arrow", "d": f"M{n(skip_x)},{n(mid)} V{n(skip_y)} H{n(add)} V{n(mid - 10)}"}))
    nodes.append(arrow_head(add, mid - 10, 90) if fwd else arrow_head(skip_x, mid - 2, 90))
    for key in ("f", "g"):                                      # which operator communicates in this pass
        active = (key == "g") == fwd
        nodes.append(el("rect", {"class": "coll hl" if active else "coll dim", "x": n(x[key]), "y": n(mid - 11),
                                 "width": "20", "height": "22", "rx": "4", "data-part": f"{part}-{key}"}))
        nodes.append(text(x[key] + 10, mid, _OP_SYMBOL[key], "coll-t", "middle", **{"dominant-baseline": "central"}))
        nodes.append(text(x[key] + 10, top + h + 14, label("fig.layer_ar" if active else "fig.layer_id"),
                          "a-small" if active else "a-small dimtext", "middle"))
    bh = (h - 8 - (tp - 1) * 4) / tp                            # the parallel region: one box per rank
    sw = (_ARROWS[3][0] - _X["stack"]) * k
    for r, label_ in enumerate(stack):
        yy = top + 4 + r * (bh + 4)
        nodes.append(el("rect", {**rank_attrs(r, "a-hbox"), "x": n(x["stack"]), "y": n(yy), "width": n(sw),
                                 "height": n(bh), "rx": "3"}))
        nodes.append(text(x["stack"] + 4, yy + bh / 2, rank_name(r) + " " + label_, "a-small", "start",
                          **{"dominant-baseline": "central"}))
    nodes.append(text(x["out"], mid + 4, name_out, "a-sym"))
    return [el("g", {"data-part": part}, nodes)]


# ------------------------------------------------------------------------------ qkv-layout

BLOCK = 26.0
PER_LINE = 13


def _bar(split: dict, cfg: att.Config, E: int, y0: float, caption) -> tuple[list, float]:
    """One layout: its head blocks (wrapped at PER_LINE), each column tinted by the rank that gets it."""
    blocks = att.qkv_blocks(cfg.heads, cfg.kv_heads, split["layout"])
    per = split["columns_per_rank"]
    nodes = [text(0, y0 + 12, caption, "cap")]
    y = y0 + 20
    lines = (len(blocks) + PER_LINE - 1) // PER_LINE
    for i, (part, h) in enumerate(blocks):
        row, col = divmod(i, PER_LINE)
        x, yy = col * BLOCK, y + row * 50
        # the block's columns [i·E, (i+1)·E) cut where a rank's range ends
        for c in range(E):
            g = i * E + c
            r = int(g // per) if split["ranks"] is not None else None
            nodes.append(el("rect", {**rank_attrs(r, "cell v2"), "x": n(x + c * BLOCK / E), "y": n(yy),
                                     "width": n(BLOCK / E), "height": "22"}))
        nodes.append(el("rect", {"class": f"a-qkv a-{part}", "x": n(x), "y": n(yy), "width": n(BLOCK), "height": "22"}))
        nodes.append(text(x + BLOCK / 2, yy + 11, f"{part}{fmt.integer(h)}", "a-ht", "middle",
                          **{"dominant-baseline": "central"}))
    # rank spans under the blocks: R0 ✓ / ✗
    if split["ranks"] is not None:
        for rk in split["ranks"]:
            r = rk["rank"]
            a, b = r * per / E, (r + 1) * per / E           # in head blocks
            for row in range(lines):
                lo, hi = max(a, row * PER_LINE), min(b, (row + 1) * PER_LINE)
                if hi <= lo:
                    continue
                yy = y + row * 50 + 26
                x1, x2 = (lo - row * PER_LINE) * BLOCK, (hi - row * PER_LINE) * BLOCK
                nodes.append(el("line", {**rank_attrs(r, "a-span"), "x1": n(x1 + 1), "y1": n(yy), "x2": n(x2 - 1),
                                         "y2": n(yy)}))
                if lo == a:
                    mark = "✓" if rk["usable"] else "✗"
                    nodes.append(text(x1 + 2, yy + 12, rank_name(r) + " " + mark,
                                      "a-ok" if rk["usable"] else "a-warn"))
    else:
        nodes.append(text(0, y + lines * 50 - 2, label("fig.qkv_uneven"), "a-warn"))
    return nodes, y + lines * 50


def figure_qkv(splits: dict, cfg: att.Config, E: int) -> dict:
    """Both layouts of the fused QKV weight cut into tp equal column blocks."""
    nodes, y = [], 4.0
    for layout, key in (("megatron", "fig.qkv_megatron"), ("concatenated", "fig.qkv_concat")):
        part, y = _bar(splits[layout], cfg, E, y, label(key))
        nodes.append(el("g", {"data-part": layout}, part))
        y += 8
    width = NARROW_W            # one drawing for every screen: the blocks wrap at PER_LINE
    title = label("fig.qkv_title", tp=fmt.integer(cfg.tp), h=fmt.integer(cfg.heads),
                  k=fmt.integer(cfg.kv_heads))
    svg = figure_svg(title, nodes, width, y, cls="fig-one")
    node = el("figure", {"class": "tp-figure", "data-figure": "qkv-layout"}, [svg])
    check(node)
    return node
