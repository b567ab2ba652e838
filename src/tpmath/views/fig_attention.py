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
from .draw import (CAP_H as CAP, NARROW_W, Panel, Row, arrow_head, arrow_panel, chain, circle, figure, group,
                   heat_panel, label, lane_badge, line, mid_text, n, op_box, pair, path, rank_attrs, rank_name, rect,
                   rows2, single, text, text_w, wrapped)

HEAT = 16.0          # a cell of a probability heat grid (S × S, up to 6 × 6)
HEAT_Y = 12.0        # a cell of an output / gradient heat grid (S × D, up to 6 × 16)


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
    per_kv = H // K
    kx = {k: x0 + (k * per_kv + (per_kv - 1) / 2) * step for k in range(K)}     # KV box left edge
    nodes = [text(0, yq + 15, label("fig.att_q_heads"), "cap"), text(0, yk + 15, label("fig.att_kv_heads"), "cap")]
    edges, wrong = [], []
    for rk in res.ranks:
        per = len(rk.q_heads) // len(rk.kv_heads)
        for j, h in enumerate(rk.q_heads):
            got = rk.kv_heads[j // per]
            ok = got == att.kv_head_of(h, H, K)
            edge = line(x0 + h * step + bw / 2, yq + 22, kx[got] + bw / 2, yk, "a-edge" if ok else "a-edge a-bad")
            (edges if ok else wrong).append(edge)
    nodes += edges + wrong                          # wrong edges on top
    for h in range(H):
        x = x0 + h * step
        nodes.append(rect(x, yq, bw, 22, rank_attrs(owner_q[h], "a-hbox"), rx="3"))
        nodes.append(mid_text(x + bw / 2, yq + 11, "q" + fmt.integer(h), "a-ht"))
    y_tags = yk + 22 + 4
    for k in range(K):
        who = holders.get(k, [])
        x = kx[k]
        one = len(who) == 1
        nodes.append(rect(x, yk, bw, 22, rank_attrs(who[0] if one else None, "a-hbox"), rx="3"))
        nodes.append(mid_text(x + bw / 2, yk + 11, "k" + fmt.integer(k), "a-ht"))
        # who holds it: one tag per rank (replicas side by side, tinted by rank)
        tw = 22.0
        left = x + bw / 2 - len(who) * tw / 2
        for i, r in enumerate(who):
            nodes.append(rect(left + i * tw + 1, y_tags, tw - 2, 14, rank_attrs(r, "badge"), rx="3"))
            nodes.append(mid_text(left + i * tw + tw / 2, y_tags + 7, rank_name(r), "a-tag"))
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
                                 bad=rows2(bad) if wrong else None, under=under[0], under_cls=under[1], min_w=52,
                                 masked=masked))
    Yp = rk.Y_partial
    panels += [arrow_panel("·W_o,ᵣ", w=58, h=2 * HEAT * cfg.seq / 2 + CAP),
               heat_panel(Yp, label("fig.partial_of", name="Yᵣ"), r, f"Yp.{r}", HEAT_Y, yscale,
                          under=_shape(Yp))]
    h = max(p.h for p in panels)
    return Row([lane_badge(r, h, "heat")] + panels, rank=r, hang=True)


def _shape(a) -> str:
    return "×".join(fmt.integer(s) for s in np.shape(rows2(a)))


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
    bad = np.abs(rows2(Y) - rows2(ref)) > tol
    line, cls = _err_line(err, tol)
    y = heat_panel(Y, label("fig.every_rank", name="Y"), None, "Y", HEAT_Y, yscale,
                   bad=bad if bad.any() else None, under=line, under_cls=cls, min_w=max(150, text_w(line, cls)))
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
    bad = np.abs(rows2(GX) - rows2(ref)) > tol
    line, cls = _err_line(err, tol)
    return [box, arrow_panel(None, w=30, h=44),
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
    panels = [box, arrow_panel(None, w=30, h=44),
              heat_panel(np.asarray(GK).T, label("fig.att_gwk"), None, "G_W_k", HEAT_Y, kscale,
                         bad=bad if bad.any() else None, under=line, under_cls=cls, min_w=max(150, text_w(line, cls)))]
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


LAYER_BASE, LAYER_WIDE = 376.0, 600.0     # the x positions below are for a LAYER_BASE-wide drawing
_STACK_W = 100          # the parallel region (one box per rank)


def figure_layer(res: lay.LayerResult, cfg: att.Config, direction: str) -> dict:
    """The pre-LN layer: two blocks, f and f̄, rank stacks; a desktop and a phone drawing."""
    title = label("fig.layer_title", tp=fmt.integer(cfg.tp), **{"pass": label(f"opt.pass.{direction}")})
    def draw(width: float):
        nodes, height = _layer_nodes(res, cfg, direction == "forward", width / LAYER_BASE)
        return nodes, width, height
    return pair("layer", title, draw, caption=label("fig.layer_caption"), wide=LAYER_WIDE)


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


# One row of the layer on a 376-wide drawing (the desktop and phone ones stretch it by k): each part's
# width and the arrow's length after it; ⊕ (add) is placed by its centre, 10 px from its right.
_X, _ARROWS = chain(4, (("in", 20, 10), ("ln", 36, 14), ("f", 20, 14), ("stack", _STACK_W, 14), ("g", 20, 14),
                        ("b", 36, 16), ("add", 10, 16), ("out", 0, 0)))
# the operator boxes' keys (x positions, data-part names) and the letters shown in them (Korthikanti et al.'s)
_OP_SYMBOL = {"f": "f", "g": "f̄"}


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
        nodes.append(line(x1, mid, x2, mid, "arrow"))
        nodes.append(arrow_head(x2, mid, 0) if fwd else arrow_head(x1, mid, 180))
    for key, label_ in (("ln", ln), ("b", bias)):               # replicated: every rank computes them alike
        nodes.append(rect(x[key], mid - 13, box, 26, {"class": "a-repbox rep"}, rx="4"))
        nodes.append(mid_text(x[key] + box / 2, mid, label_, "a-ht"))
    add = x["add"]
    nodes.append(circle(add, mid, 10, "a-repbox rep"))
    nodes.append(mid_text(add, mid, "+", "a-ht"))
    skip_x, skip_y = 28 * k, top - 4                            # the residual skips the block
    nodes.append(path(f"M{n(skip_x)},{n(mid)} V{n(skip_y)} H{n(add)} V{n(mid - 10)}", "arrow"))
    nodes.append(arrow_head(add, mid - 10, 90) if fwd else arrow_head(skip_x, mid - 2, 90))
    for key in ("f", "g"):                                      # which operator communicates in this pass
        active = (key == "g") == fwd
        nodes.append(rect(x[key], mid - 11, 20, 22, {"class": "coll hl" if active else "coll dim"}, rx="4",
                          **{"data-part": f"{part}-{key}"}))
        nodes.append(mid_text(x[key] + 10, mid, _OP_SYMBOL[key], "coll-t"))
        nodes.append(text(x[key] + 10, top + h + 14, label("fig.layer_ar" if active else "fig.layer_id"),
                          "a-small" if active else "a-small dimtext", "middle"))
    bh = (h - 8 - (tp - 1) * 4) / tp                            # the parallel region: one box per rank
    sw = _STACK_W * k
    for r, label_ in enumerate(stack):
        yy = top + 4 + r * (bh + 4)
        nodes.append(rect(x["stack"], yy, sw, bh, rank_attrs(r, "a-hbox"), rx="3"))
        nodes.append(mid_text(x["stack"] + 4, yy + bh / 2, rank_name(r) + " " + label_, "a-small", "start"))
    nodes.append(text(x["out"], mid + 4, name_out, "a-sym"))
    return [group(nodes, part=part)]


# ------------------------------------------------------------------------------ qkv-layout

BLOCK = 26.0
PER_LINE = int(NARROW_W // BLOCK)   # head blocks per line: the drawing is a phone column wide


def _bar(split: dict, cfg: att.Config, E: int, y0: float, caption) -> tuple[list, float]:
    """One layout: its head blocks (wrapped at PER_LINE), each column tinted by the rank that gets it."""
    blocks = att.qkv_blocks(cfg.heads, cfg.kv_heads, split["layout"])
    per = split["columns_per_rank"]
    cap, caps = wrapped(0, y0 + 12, caption, NARROW_W, "cap")
    nodes = [cap]
    y = y0 + 20 + (caps - 1) * 15
    lines = (len(blocks) + PER_LINE - 1) // PER_LINE
    for i, (part, h) in enumerate(blocks):
        row, col = divmod(i, PER_LINE)
        x, yy = col * BLOCK, y + row * 50
        # the block's columns [i·E, (i+1)·E) cut where a rank's range ends
        for c in range(E):
            g = i * E + c
            r = int(g // per) if split["ranks"] is not None else None
            nodes.append(rect(x + c * BLOCK / E, yy, BLOCK / E, 22, rank_attrs(r, "cell v2")))
        nodes.append(rect(x, yy, BLOCK, 22, {"class": f"a-qkv a-{part}"}))
        nodes.append(mid_text(x + BLOCK / 2, yy + 11, f"{part}{fmt.integer(h)}", "a-ht"))
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
                nodes.append(line(x1 + 1, yy, x2 - 1, yy, "a-span", rank=r))
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
    captions = {"megatron": [label(f"fig.qkv_megatron_{i}") for i in (1, 2, 3)],
                "concatenated": [label("fig.qkv_concat")]}
    for layout, caption in captions.items():
        part, y = _bar(splits[layout], cfg, E, y, caption)
        nodes.append(group(part, part=layout))
        y += 8
    width = NARROW_W            # one drawing for every screen: the blocks wrap at PER_LINE
    title = label("fig.qkv_title", tp=fmt.integer(cfg.tp), h=fmt.integer(cfg.heads),
                  k=fmt.integer(cfg.kv_heads))
    return single("qkv-layout", title, nodes, width, y)
