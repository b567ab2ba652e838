"""A tiny bilingual content tree for the builder tests (written into a tmp directory).

It uses the real page-chrome strings (content/i18n/<lang>.site.toml, .runtime.toml) so the
real templates render, plus a few formulas, a table, code and a Python demo.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ALIGNED = r"""$$
\begin{aligned}
W_1&=[W_{1a}\;W_{1b}],\quad W_2=\begin{bmatrix}W_{2a}\\W_{2b}\end{bmatrix},\\
H_a&=\phi(XW_{1a}),\quad H_b=\phi(XW_{1b}),\\
Y&=H_aW_{2a}+H_bW_{2b}.
\end{aligned}
$$"""

PAGE = """+++
title = "{title}"
description = "{description}"
order = 1
+++

{intro} $Y=\\phi(XW_1)W_2$ and $L=\\sum Y\\odot G$; a price of \\$5.

## {h_mlp} {{#mlp}}

{aligned}

### {h_table} {{#table}}

| Rank | $x_r$ |
|---|---|
| R0 | 1 |
| R1 | 2 |

: {caption}

```python
cost = "$5"  # a dollar sign in code is not math
```

Inline code `a $b$ c` is not math either.

{{{{pydemo hello}}}}

## {h_vocab} {{#vocab}}

$$\\begin{{aligned}}m_r&=\\max_{{j\\in V_r}}z_j,\\\\ s&=\\sum_r s_r.\\end{{aligned}}$$
"""

PAGE2 = """+++
title = "{title}"
order = 2
+++

## {h} {{#second}}

$$A = [A_1 \\; A_2]$$
"""

TEXT = {
    "en": dict(title="Fixture page", description="A page to test the builder.", intro="Intro with",
               h_mlp="Column then row", h_table="A table", caption="Values per rank", h_vocab="Vocab",
               p2="Second page", h2="Second"),
    "zh": dict(title="测试页面", description="用来测试构建器的页面。", intro="引言：",
               h_mlp="先列后行", h_table="表格", caption="各 rank 的值", h_vocab="词表",
               p2="第二页", h2="第二节"),
}

DEMO = 'import numpy as np\nprint("sum =", int(np.arange(4).sum()))\n'


def make_content(root: Path, *, second_page: bool = True, strings_from_repo: bool = False) -> Path:
    """Write the fixture content tree into ``root`` and return it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "i18n").mkdir(exist_ok=True)
    (root / "demos").mkdir(exist_ok=True)
    src_i18n = ROOT / "content" / "i18n"
    for lang, t in TEXT.items():
        (root / lang).mkdir(exist_ok=True)
        (root / lang / "index.md").write_text(
            PAGE.format(aligned=ALIGNED, **t), encoding="utf-8")
        if second_page:
            (root / lang / "row-parallel.md").write_text(
                PAGE2.format(title=t["p2"], h=t["h2"]), encoding="utf-8")
        if strings_from_repo:
            for path in sorted(src_i18n.glob(f"{lang}.*toml")):
                shutil.copyfile(path, root / "i18n" / path.name)
            if (src_i18n / f"{lang}.toml").exists():
                shutil.copyfile(src_i18n / f"{lang}.toml", root / "i18n" / f"{lang}.toml")
        else:
            for name in (f"{lang}.site.toml", f"{lang}.runtime.toml"):
                if (src_i18n / name).exists():
                    shutil.copyfile(src_i18n / name, root / "i18n" / name)
            (root / "i18n" / f"{lang}.toml").write_text(
                f'[label]\nfixture = "{t["title"]}"\n', encoding="utf-8")
    (root / "demos" / "hello.py").write_text(DEMO, encoding="utf-8")
    return root


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root`` by relative path."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
