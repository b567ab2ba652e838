"""Chinese that reads as written by a Chinese ML engineer (issue 25, item 19): the phrases the
review found are gone, and the interface strings follow the forms the site chose."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTENT = ROOT / "content"


def zh_text() -> str:
    files = sorted((CONTENT / "zh").glob("*.md")) + sorted((CONTENT / "i18n").glob("zh*.toml"))
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def strings(lang: str) -> dict[str, str]:
    out: dict[str, str] = {}

    def flat(table: dict, prefix: str = "") -> None:
        for k, v in table.items():
            if isinstance(v, dict):
                flat(v, f"{prefix}{k}.")
            else:
                out[prefix + k] = v
    for path in sorted((CONTENT / "i18n").glob(f"{lang}.*toml")) + [CONTENT / "i18n" / f"{lang}.toml"]:
        flat(tomllib.loads(path.read_text(encoding="utf-8")))
    return out


@pytest.mark.parametrize("phrase", [
    "KV 头像查询头", "变成乱码", "相遇", "这不只是巧合", "原示例", "这两个轴需要不同的系数", "第二张表是算出来的，不是断言",
    "有两个值把这两件事分开", "为了有东西可求导", "归别的卡负责", "所有 key 进行", "真正的规则是数据布局",
    "存放在哪里", "相对张量并行行", "求和 sum", "二叉树 Tree", "每个参数的优化器相关字节数", "原始示例",
])
def test_the_reviewed_phrases_are_rewritten(phrase):
    assert phrase not in zh_text()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_interface_string_starts_with_an_ellipsis(lang):
    assert sorted(k for k, v in strings(lang).items() if v.lstrip().startswith(("…", "..."))) == []


def test_option_labels_name_the_thing_then_gloss_it():
    """One form for every select: the name as the code and NCCL write it, the Chinese in
    full-width brackets (AllReduce（全归约）, sum（求和）, Ring（环形）)."""
    zh = strings("zh")
    for group in ("opt.collective.", "opt.op.", "opt.algorithm."):
        labels = {k: v for k, v in zh.items() if k.startswith(group)}
        assert labels and all(re.fullmatch(r"[A-Za-z]+（[^（）]+）", v) for v in labels.values()), labels


def test_table_headers_write_token_and_logits_as_the_prose_does():
    zh = strings("zh")
    assert zh["col.token"] == "token" and zh["col.logits"] == "logits"


@pytest.mark.parametrize("lang, words", [("en", ("weights", "gradients")), ("zh", ("权重", "梯度"))])
def test_the_bytes_per_parameter_control_says_it_counts_weights_and_gradients(lang, words):
    label = strings(lang)["ctl.mem_optimizer"]
    assert all(w in label for w in words), label


def test_the_hang_reason_says_the_calls_are_paired():
    zh = strings("zh")
    for key in ("hang.reason_met_later", "hang.reason_met_other_name"):
        assert "配成了一对" in zh[key]
