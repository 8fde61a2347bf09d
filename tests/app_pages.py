"""The pages app.py registers, read from its source so tests follow the router."""

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class RegisteredPage:
    path: str
    title: str
    url_path: str
    default: bool


def registered_pages() -> list[RegisteredPage]:
    tree = ast.parse((ROOT / "app.py").read_text())
    pages = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "Page"
        ):
            options = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
            pages.append(
                RegisteredPage(
                    path=ast.literal_eval(node.args[0]),
                    title=options["title"],
                    url_path=options["url_path"],
                    default=options.get("default", False),
                )
            )
    return pages
