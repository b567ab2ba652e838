"""A minimal HTML tree (stdlib html.parser) for the builder tests: find elements, read text."""

from __future__ import annotations

from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict, parent: "Node | None" = None):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def iter(self, tag: str | None = None):
        if tag is None or self.tag == tag:
            yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter(tag)

    def find_all(self, tag: str | None = None, **attrs) -> list["Node"]:
        out = []
        for node in self.iter(tag):
            if all((node.attrs.get(k.rstrip("_").replace("_", "-")) == v) if v is not True
                   else k.rstrip("_").replace("_", "-") in node.attrs for k, v in attrs.items()):
                out.append(node)
        return out

    def find(self, tag: str | None = None, **attrs) -> "Node | None":
        found = self.find_all(tag, **attrs)
        return found[0] if found else None

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def element_children(self) -> list["Node"]:
        return [c for c in self.children if isinstance(c, Node)]

    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, {k: (v if v is not None else "") for k, v in attrs}, self.cur))

    def handle_endtag(self, tag):
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is None:
            raise AssertionError(f"unmatched </{tag}>")
        if node is not self.cur:
            raise AssertionError(f"</{tag}> closes <{self.cur.tag}> too (mis-nested HTML)")
        self.cur = node.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse(html: str) -> Node:
    """Parse ``html``; mis-nested or unclosed elements fail the test."""
    b = _Builder()
    b.feed(html)
    b.close()
    if b.cur is not b.root:
        raise AssertionError(f"<{b.cur.tag}> is never closed")
    return b.root


def as_tree(node: Node) -> dict:
    """An element as an element tree (ARCHITECTURE.md, "Element trees"): ``{"t", "a", "c"}`` or,
    for an element without element children, ``{"t", "a", "x": its text}`` ("a" only when it has
    attributes), so that built markup compares with the tree a view returned."""
    out: dict = {"t": node.tag}
    if node.attrs:
        out["a"] = dict(node.attrs)
    kids = node.element_children()
    if kids:
        out["c"] = [as_tree(k) for k in kids]
    else:
        out["x"] = node.text()
    return out
