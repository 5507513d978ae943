"""The one rule, checked once for the whole package: only `tapeviz.worker` touches TensorFlow.

The Streamlit process imports everything else; TensorFlow's multi-second import and its
process-global op callbacks belong in worker processes (DESIGN.md).
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tapeviz"
TF_SIDE = PACKAGE / "worker"
# The command line and the package's front doors (tapeviz, tapeviz.keras) may reach the TF
# side inside a function, once the user asked for something that needs it.
LAZY_ENTRY_POINTS = {PACKAGE / "__main__.py", PACKAGE / "__init__.py", PACKAGE / "keras.py"}


def server_side_modules():
    """Every module outside tapeviz/worker; the example programs are user code, not modules."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if TF_SIDE in path.parents:
            continue
        if path.parent.name == "examples" and path.name != "__init__.py":
            continue
        yield path


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(path: Path):
    """(absolute module name, inside a function?) for each import statement in the file."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    tree = ast.parse(path.read_text(), filename=str(path))
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    nested = {id(n) for f in functions for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in nested
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            names = [name] if node.module else [f"{name}.{a.name}" for a in node.names]
            for n in names:
                yield n, id(node) in nested


def test_the_tensorflow_side_is_one_subpackage():
    offenders = []
    for path in server_side_modules():
        for name, lazy in imported_names(path):
            top = name.split(".")[0]
            if top in ("tensorflow", "keras", "tf_keras"):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
            elif name == "tapeviz.worker" or name.startswith("tapeviz.worker."):
                if not (lazy and path in LAZY_ENTRY_POINTS):
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "TensorFlow outside tapeviz/worker:\n" + "\n".join(offenders)


@pytest.mark.slow   # a fresh interpreter, so that nothing this process imported counts
def test_importing_everything_else_loads_no_tensorflow():
    # Imported for real, in a fresh interpreter: this catches a path through any module,
    # a third-party one included, that the static check above cannot see.
    names = [module_name(p) for p in server_side_modules()]
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "import tapeviz.__main__ as cli\n"
            "cli.build_parser()\n"
            "from tapeviz import examples\n"
            "[examples.load(n) for n in examples.names()]\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'keras', 'tf_keras'))\n"
            "sys.exit(', '.join(loaded[:5]) or None)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(names) >= 15   # the walk found the package, not an empty folder


# The rooms of tapeviz/ and what each may import of the others (DESIGN.md, "Layout"). A
# room not listed may import any room but the worker. Streamlit is the ui room's alone.
ROOMS_MAY_NOT_IMPORT = {
    "words": ("draw", "state", "ui", "server", "worker"),
    "draw": ("state", "ui", "server", "worker"),
    "state": ("ui", "worker"),
    "server": ("draw", "state", "ui", "words", "worker"),
    "matching": ("state", "ui", "server", "worker"),
}


def room(path: Path):
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else None


def test_rooms_import_only_downward():
    offenders = []
    for path in server_side_modules():
        for name, _ in imported_names(path):
            parts = name.split(".")
            if parts[0] == "streamlit" and room(path) != "ui":
                offenders.append(f"{path.relative_to(ROOT)} imports Streamlit (only tapeviz/ui may)")
            if parts[0] == "tapeviz" and len(parts) > 1 and parts[1] in ROOMS_MAY_NOT_IMPORT.get(room(path), ()):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "imports running back up:\n" + "\n".join(offenders)


def test_the_pages_are_the_layout_the_project_was_asked_for():
    top = {p.name for p in ROOT.iterdir()}
    assert {"app.py", "tapeviz", "pages", "tests", "requirements.txt"} <= top
    assert {p.name for p in (ROOT / "pages").glob("*.py")} == {"debugger.py", "train.py"}
