"""tools/mutate.py (`make mutate`): which mutants it makes of a small hand-written module."""

import ast
import importlib.util
import sys
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "mutate_tool", Path(__file__).resolve().parents[1] / "tools" / "mutate.py"
)
mutate = importlib.util.module_from_spec(SPEC)
sys.modules["mutate_tool"] = mutate  # dataclasses look their module up there
SPEC.loader.exec_module(mutate)

SOURCE = '''
import numpy as np

LIMIT = 3  # module level: not mutated


def f(x, y, axis=-1):
    """A docstring is not mutated."""
    if x.size > 0:
        raise ValueError(f"x has {x.size + 1} entries")  # nor is a raise
    total = np.sum(x * 2.0, axis=axis) - y.T
    return total  # pragma: no mutate
'''


def test_the_mutants_of_a_small_function():
    mutants, tree, lines = mutate.find_mutants("example", SOURCE)
    changes = sorted(f"{m.before} -> {m.after}" for m in mutants)
    assert changes == sorted(
        [
            "-1 -> 1",  # the default axis: the minus removed, and -1 -> -2
            "-1 -> -2",
            "x.size > 0 -> not x.size > 0",
            "x.size > 0 -> x.size >= 0",
            "x.size > 0 -> x.size > 1",
            "np.sum(x * 2.0, axis=axis) - y.T -> np.sum(x * 2.0, axis=axis) + y.T",
            "x * 2.0 -> x / 2.0",
            "x * 2.0 -> x * 4.0",
            "np.sum(x * 2.0, axis=axis) -> np.sum(x * 2.0, axis=-1)",
            "y.T -> y",
        ]
    )
    assert {m.function for m in mutants} == {"f"}
    # Each mutant, applied, is valid Python that differs from the original in one place.
    original = ast.unparse(tree)
    for m in mutants:
        mutated = ast.unparse(mutate._apply(tree, lines, m.site, m.kind))
        assert mutated != original
        compile(mutated, "example.py", "exec")
    assert ast.unparse(tree) == original  # applying works on a copy


def test_equivalent_mutants_name_real_ones():
    # Every allow-listed id must be one the tool makes of today's code, so none is stale.
    ids = set()
    for module in mutate.MODULES:
        ids |= {m.id for m in mutate.find_mutants(module)[0]}
    assert set(mutate.EQUIVALENT) <= ids
    assert all(reason.strip() for reason in mutate.EQUIVALENT.values())


def test_only_a_kill_by_a_test_makes_an_equivalent_entry_stale():
    mutants = mutate.find_mutants("probing")[0]
    listed = [m for m in mutants if m.id in mutate.EQUIVALENT][:3]
    other = next(m for m in mutants if m.id not in mutate.EQUIVALENT)
    assert len(listed) == 3
    fate = {listed[0]: "survived", listed[1]: "timeout", listed[2]: "killed", other: "killed"}
    assert mutate.stale_entries([*listed, other], fate) == [listed[2].id]
