"""The layout the code keeps: a page is a package, imports run one way, Streamlit's internals in
one module, modules small enough to read.

Read from the source (`ast`), so a rule broken anywhere fails here with the place named.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ui.pages import PAGES, PageRecord

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("app.py", "pages", "ui", "attention_core", "server", "harness", "bench")
MAX_MODULE_LINES = 500
MAX_PAGE_FILE_LINES = 300
# Product code whose modules must stay short enough to read in one sitting.
MODULE_PLACES = ("ui", "attention_core", "server", "harness")


def python_files(*places: str) -> Iterator[Path]:
    for place in places:
        path = ROOT / place
        yield from [path] if path.is_file() else sorted(path.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path, name: str | None = None) -> list[str]:
    """The package a relative import in `path` (module `name`) starts from, as its parts."""
    package = (name or module_name(path)).split(".")
    return package if path.name == "__init__.py" else package[:-1]


def imported_from(node: ast.ImportFrom, package: list[str]) -> str:
    """The module a `from ... import` statement in `package` reads, relative ones resolved."""
    base = package[: len(package) - node.level + 1] if node.level else []
    return ".".join([*base, node.module] if node.module else base)


def imports(path: Path, name: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in `path` (module `name`), relative ones resolved: at the
    top, inside a function or a class alike."""
    tree = ast.parse(path.read_text())
    package = package_of(path, name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            module = imported_from(node, package)
            yield node.lineno, module
            for alias in node.names:  # `from ui.masking import figures` imports a module too
                yield node.lineno, f"{module}.{alias.name}"


def first(module: str) -> str:
    return module.split(".")[0]


def page_package(module: str) -> str | None:
    """`masking` for `ui.masking.grid`; None for shared ui code."""
    parts = module.split(".")
    ids = {record.id for record in PAGES}
    return parts[1] if len(parts) > 1 and parts[0] == "ui" and parts[1] in ids else None


PAGE_OF_FILE = {record.path: record.id for record in PAGES}


# -- a page is a package ---------------------------------------------------------------------------


def missing_parts(record: PageRecord) -> list[str]:
    """What a registered page lacks of the recipe (README, "Adding a page"), by path."""
    page_id = record.id
    missing = [] if importlib.util.find_spec(record.package) else [f"ui/{page_id}/__init__.py"]
    wanted = [
        f"tests/test_page_{page_id}.py",
        f"tests/e2e/test_{page_id}.py",
        f"bench/bench_page_{page_id}.py",
    ]
    missing += [place for place in wanted if not (ROOT / place).is_file()]
    browser_test = ROOT / "tests" / "e2e" / f"test_{page_id}.py"
    # Its link as a fresh server's first request: the state it carries, checked on the page.
    if browser_test.is_file() and "\nFIRST_REQUEST = " not in browser_test.read_text():
        missing.append(f"FIRST_REQUEST in tests/e2e/test_{page_id}.py")
    page_file = Path(record.path) if Path(record.path).is_absolute() else ROOT / record.path
    # Its widgets' keys carry its id: the page's PageState is named by it.
    if f'PageState("{page_id}")' not in page_file.read_text():
        missing.append(f'PageState("{page_id}") in {record.path}')
    # A deep link must reach the router, never Streamlit's legacy lookup of pages/ file stems.
    if page_file.stem == record.url_path:
        missing.append(f"a page file named unlike its url_path {record.url_path!r}")
    return missing


@pytest.mark.parametrize("record", PAGES, ids=[record.id for record in PAGES])
def test_every_registered_page_has_its_package_tests_and_benchmark(record):
    assert missing_parts(record) == []


def test_no_module_or_page_file_is_too_long():
    long_modules = {
        str(path.relative_to(ROOT)): lines
        for path in python_files(*MODULE_PLACES)
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    long_pages = {
        str(path.relative_to(ROOT)): lines
        for path in python_files("pages")
        if (lines := len(path.read_text().splitlines())) > MAX_PAGE_FILE_LINES
    }
    assert long_modules == {}, f"modules over {MAX_MODULE_LINES} lines"
    assert long_pages == {}, f"page files over {MAX_PAGE_FILE_LINES} lines"


# -- imports run one way: pages -> ui -> server, attention_core; harness and bench beside ---------


def test_imports_run_one_way():
    wrong = []
    for path in python_files(*PRODUCT):
        place, name = str(path.relative_to(ROOT)), module_name(path)
        top = first(name)
        for line, module in imports(path):
            target = first(module)
            where = f"{place}:{line} imports {module}"
            if target == "tests":
                wrong.append(f"{where}: product code never imports the tests")
            if top == "attention_core" and target in {"ui", "pages", "server", "harness",
                                                      "bench", "streamlit"}:  # fmt: skip
                wrong.append(f"{where}: the math knows nothing of the app")
            if top in {"ui", "server", "harness"} and target in {"pages", "bench"}:
                wrong.append(f"{where}: {top} never imports pages or benchmarks")
            if top == "server" and target == "streamlit" and place != "server/sessions.py":
                wrong.append(f"{where}: the server draws nothing (its one touch of Streamlit "
                             "is server/sessions.py)")  # fmt: skip
            if top == "server" and target == "ui":
                wrong.append(f"{where}: the server stands below the views (app.py hands it "
                             "what it needs)")  # fmt: skip
            if top == "ui" and target == "harness":
                wrong.append(f"{where}: the views never import the test harness")
            own, other = page_package(name) or PAGE_OF_FILE.get(place), page_package(module)
            if other is not None and top in {"ui", "pages"} and own != other:
                wrong.append(f"{where}: a page's package is its own (ui/{other}/)")
    assert wrong == []


def import_cycles(names: dict[str, Path]) -> list[list[str]]:
    """Every cycle of imports among the modules `names` (module name -> file), as a path."""
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        targets = {module for _, module in imports(path, name)}
        # A package's own modules import it first (`from . import masks`): not a cycle.
        graph[name] = {t for t in targets if t in names and not (name + ".").startswith(t + ".")}
    cycles, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                cycles.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_import_cycles():
    """The project's own modules import each other in no cycle, counting every import statement:
    one inside a function ties two modules together as much as one at the top."""
    assert import_cycles({module_name(path): path for path in python_files(*PRODUCT)}) == []


def test_an_import_inside_a_function_closes_a_cycle(tmp_path):
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def late():\n    from a import thing\n")
    (tmp_path / "c.py").write_text("import a\n")
    names = {path.stem: path for path in tmp_path.glob("*.py")}
    assert import_cycles(names) == [["a", "b", "a"]]
    (tmp_path / "b.py").write_text("def late():\n    return 1\n")
    assert import_cycles(names) == []


# -- nothing imports a private name from another module -------------------------------------------


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(path: Path, name: str, modules: set[str]) -> Iterator[str]:
    """Each private name `path` (module `name`) takes from another of the project's `modules`,
    as "line: module._name": `from module import _name`, or `module._name` on a module it
    imported. Binding a module to a private alias (`import numpy as _np`) takes nothing."""
    tree = ast.parse(path.read_text())
    package = package_of(path, name)
    projects = {first(module) for module in modules}
    bound: dict[str, str] = {}  # a local name -> the project module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name if alias.asname else first(alias.name)
                if first(target) in projects:
                    bound[alias.asname or target] = target
        elif isinstance(node, ast.ImportFrom):
            module = imported_from(node, package)
            if first(module) not in projects or module == name:
                continue
            for alias in node.names:
                if is_private(alias.name):
                    yield f"{node.lineno}: {module}.{alias.name}"
                elif f"{module}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{module}.{alias.name}"
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
            continue
        dotted, value = [], node.value
        while isinstance(value, ast.Attribute):
            dotted.insert(0, value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            module = ".".join([bound[value.id], *dotted])
            if module in modules and module != name:
                yield f"{node.lineno}: {module}.{node.attr}"


def test_nothing_imports_a_private_name_from_another_module():
    """A name with an underscore is its module's own: another module that needs it needs it made
    public, with a contract in its docstring, not reached for behind the module's back."""
    paths = {module_name(path): path for path in python_files(*PRODUCT)}
    found = [
        f"{paths[name].relative_to(ROOT)}:{where}"
        for name in sorted(paths)
        for where in private_imports(paths[name], name, set(paths))
    ]
    assert found == [], "make these names public in the module that defines them"


def test_the_private_name_rule_reads_imports_and_module_attributes(tmp_path):
    (tmp_path / "core").mkdir()
    for module in ("__init__", "softmax"):
        (tmp_path / "core" / f"{module}.py").write_text("")
    attention = tmp_path / "core" / "attention.py"
    attention.write_text(
        '"""Calls softmax._stable as a comment would."""\n'
        "import numpy as _np\n"
        "from numpy import _core\n"
        "import core.softmax\n"
        "from . import softmax\n"
        "from .softmax import __version__, stable\n"
        "from core.softmax import (\n"
        "    stable_too,\n"
        "    _masked,\n"
        ")\n"
        "def f(x):\n"
        "    return softmax._row_max(x) + core.softmax._shift(x) + _np._pytesttester\n"
        "def g(steps):\n"
        "    return steps._cache, stable._private, _helper(x)\n"
        "def _helper(x):\n"
        "    from .attention import _helper\n"
    )
    modules = {"core", "core.softmax", "core.attention"}
    assert set(private_imports(attention, "core.attention", modules)) == {
        "7: core.softmax._masked",
        "12: core.softmax._row_max",
        "12: core.softmax._shift",
    }


# -- Streamlit's private internals live in one module ----------------------------------------------

# The private attributes of Streamlit's own objects the app relies on: its server's session
# manager and event loop, a session's fragments. tests/test_sessions.py pins them.
STREAMLIT_INTERNALS = re.compile(
    r"\._(get_async_objs|session_mgr|storage_lock|session_storage|cache|fragment_storage)\b"
    r"|runtime\.get_instance\("
)


def test_streamlit_internals_are_touched_in_one_module_outside_ui():
    touching = sorted(
        str(path.relative_to(ROOT))
        for path in python_files("app.py", "pages", "ui", "attention_core", "server")
        if STREAMLIT_INTERNALS.search(path.read_text())
    )
    assert touching == ["server/sessions.py"]


# -- one cache for the pages' data ----------------------------------------------------------------

STREAMLIT_CACHES = {"cache_data", "cache_resource"}
# The only Streamlit cache left: the byte cache's own hook into "Clear caches". Everything a
# page computes, and every figure, goes through ui.widgets.byte_cache.bounded_by_bytes.
STREAMLIT_CACHE_USES = {
    ("ui/widgets/byte_cache.py", "_cleared_with_streamlit"),
}


def streamlit_cache_uses(path: Path) -> Iterator[tuple[str, int]]:
    """(the function it caches, or the one it is called in; line) for each `st.cache_data` or
    `st.cache_resource` in `path`, as a decorator or a call (not `.clear()`), and each import of
    either name from streamlit."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def where(node: ast.AST) -> str:
        while node in parents:
            node = parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                return node.name
        return "<module>"

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamlit"):
            for alias in node.names:
                if alias.name in STREAMLIT_CACHES:
                    yield f"import {alias.name}", node.lineno
        if not (isinstance(node, ast.Attribute) and node.attr in STREAMLIT_CACHES):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Attribute):  # st.cache_data.clear(): no new cache
            continue
        decorated = parent if isinstance(parent, ast.Call) and parent.func is node else node
        holder = parents.get(decorated)
        if isinstance(holder, ast.FunctionDef) and decorated in holder.decorator_list:
            yield holder.name, node.lineno
        else:
            yield where(node), node.lineno


def test_the_pages_data_is_cached_by_the_one_byte_bounded_helper():
    found = {
        (str(path.relative_to(ROOT)), name): line
        for path in python_files("app.py", "pages", "ui", "server")
        for name, line in streamlit_cache_uses(path)
    }
    unexpected = {f"{path}:{line} ({name})" for (path, name), line in found.items()
                  if (path, name) not in STREAMLIT_CACHE_USES}  # fmt: skip
    assert not unexpected, (
        "Cache a page's data with ui.widgets.byte_cache.bounded_by_bytes (lane=None for cheap "
        f"work), not a Streamlit cache: {sorted(unexpected)}"
    )
    assert set(found) == STREAMLIT_CACHE_USES  # one gone: take it off the list


def test_the_cache_rule_reads_decorators_and_calls_not_comments(tmp_path):
    module = tmp_path / "page.py"
    module.write_text(
        '"""Once cached with st.cache_data."""\n'
        "import streamlit as st\n"
        "from streamlit import cache_resource\n"
        "# @st.cache_data would copy\n"
        "@st.cache_data\n"
        "def bare(): ...\n"
        "@st.cache_resource(max_entries=2)\n"
        "def called(): ...\n"
        "def wrapped():\n"
        "    st.cache_data.clear()\n"
        "    return st.cache_data(show_spinner=False)(bare)\n"
    )
    assert sorted(streamlit_cache_uses(module)) == [
        ("bare", 5),
        ("called", 7),
        ("import cache_resource", 3),
        ("wrapped", 11),
    ]


# -- a figure builder draws what it is given ------------------------------------------------------

# What finds or computes a model's data: a figure module calling one could turn a drawing into a
# forward pass when a bounded cache has dropped the entry it meant to find.
MODEL_LOOKUPS = frozenset(
    {
        "continuation",
        "load_decoder",
        "load_model",
        "page_trace",
        "run_llama",
        "run_bert",
        "run_gpt2",
    }
)


def model_reaches(path: Path, name: str | None = None) -> Iterator[str]:
    """Where `path` (module `name`) imports ui.models (or a lookup by name) or calls a lookup,
    as "line: what"."""
    for line, module in imports(path, name):
        if module == "ui.models" or module.startswith("ui.models."):
            yield f"{line}: import {module}"
        elif module.rsplit(".", 1)[-1] in MODEL_LOOKUPS:
            yield f"{line}: import {module}"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in MODEL_LOOKUPS:
                yield f"{node.lineno}: {name}()"


def test_figure_modules_take_their_data_and_never_reach_a_model():
    figure_modules = sorted((ROOT / "ui").rglob("figures.py"))
    assert len(figure_modules) >= 10  # the rule reads every page's figures, new ones too
    reached = {
        str(path.relative_to(ROOT)): found
        for path in figure_modules
        if (found := list(model_reaches(path)))
    }
    assert not reached, (
        "A figure builder takes the arrays it draws, passed with render.digested(digest, value), "
        f"never a model or what to look its data up with: {reached}"
    )


def test_the_figure_rule_reads_imports_and_calls_not_comments(tmp_path):
    module = tmp_path / "figures.py"
    module.write_text(
        '"""Never calls load_decoder() nor imports ui.models."""\n'
        "from ui.models import smollm\n"
        "from ui.decoder.generation import page_trace\n"
        "import ui.models.minilm as minilm\n"
        "# data = run_llama(model, ids)\n"
        "def figure(ids):\n"
        "    model = smollm.load_decoder().model\n"
        "    return page_trace(model, ids), run_bert(model, ids)\n"
    )
    assert sorted(model_reaches(module, "ui.new_page.figures")) == [
        "2: import ui.models",
        "2: import ui.models.smollm",
        "3: import ui.decoder.generation.page_trace",
        "4: import ui.models.minilm",
        "7: load_decoder()",
        "8: page_trace()",
        "8: run_bert()",
    ]
