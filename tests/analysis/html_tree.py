"""A report page as a tree (html.parser), for tests that read its structure and order rather
than grep its text: document order is `walk()` order."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

VOID = {"meta", "img", "br", "hr", "input", "link"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self) -> list[Node]:
        """This node and every node under it, in document order."""
        out = [self]
        for child in self.children:
            if isinstance(child, Node):
                out += child.walk()
        return out

    def find_all(self, tag: str) -> list[Node]:
        return [n for n in self.walk() if n.tag == tag]

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())


class TreeParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_endtag(self, tag: str) -> None:
        assert self.current.tag == tag, f"</{tag}> closes <{self.current.tag}>"
        self.current = self.current.parent or self.root

    def handle_data(self, data: str) -> None:
        self.current.children.append(data)


def tree(path: Path) -> Node:
    parser = TreeParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser.root


def after_heading(root: Node, title: str, tag: str) -> Node:
    """The first `tag` element after the h3 titled `title`."""
    nodes = root.walk()
    start = next(i for i, n in enumerate(nodes) if n.tag == "h3" and n.text() == title)
    return next(n for n in nodes[start:] if n.tag == tag)


def rows(table: Node) -> list[list[Node]]:
    body = table.find_all("tbody")[0]
    return [tr.find_all("td") for tr in body.find_all("tr")]
