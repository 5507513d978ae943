"""The suite's own shape: what test modules share lives in helper modules (builders,
plain_runs, figure_boxes, npz_bombs, browser_util, hosted_util), never in another test
module, so running one file never collects or imports another's tests."""
import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent


def imported(path: pathlib.Path) -> set:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_no_test_module_imports_another():
    modules = {path.stem for path in TESTS.glob("test_*.py")}
    found = {path.name: sorted(imported(path) & modules) for path in TESTS.glob("*.py")}
    assert {name: mods for name, mods in found.items() if mods} == {}
