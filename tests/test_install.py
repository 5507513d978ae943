"""`pip install .` (pyproject.toml) gives a `tapeviz` command that is `python -m tapeviz`,
and finds its app for `tapeviz view`, from any folder, without PYTHONPATH."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow   # a virtualenv, pip and the installed command

ROOT = Path(__file__).resolve().parent.parent


def tree_files():
    """The files of this checkout as git would ship them (tracked, or new and not ignored)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    source = base / "src"
    for name in tree_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    venv = base / "venv"
    # System site-packages: TensorFlow and Streamlit are already there; nothing is downloaded.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    result = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps",
                             "--no-build-isolation", str(source)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return venv


def clean_env():
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_the_tapeviz_command_is_python_m_tapeviz(installed, tmp_path):
    command = str(installed / "bin" / "tapeviz")
    python = str(installed / "bin" / "python")
    for args in (["--help"], ["record", "--help"], ["view", "--help"]):
        ours = subprocess.run([command, *args], cwd=tmp_path, env=clean_env(), capture_output=True,
                              text=True, timeout=120)
        module = subprocess.run([python, "-m", "tapeviz", *args], cwd=tmp_path, env=clean_env(),
                                capture_output=True, text=True, timeout=120)
        assert ours.returncode == module.returncode == 0
        assert ours.stdout == module.stdout
    where = subprocess.run([python, "-c", "import tapeviz, tapeviz.__main__ as m; "
                            "print(tapeviz.__file__); print(m.app_path())"], cwd=tmp_path,
                           env=clean_env(), capture_output=True, text=True, timeout=120)
    package, app = where.stdout.split()
    assert package.startswith(str(installed)) and app == str(installed / "share/tapeviz/app.py")
    assert (installed / "share/tapeviz/pages/debugger.py").is_file()


def test_the_installed_command_records_a_program(installed, tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import sys
        import tensorflow as tf
        w = tf.Variable(2.0)
        with tf.GradientTape() as tape:
            y = w * w * float(sys.argv[1])
        print(tape.gradient(y, w).numpy())
    """).lstrip("\n"))
    result = subprocess.run([str(installed / "bin" / "tapeviz"), "record", "prog.py", "-o", "out.json",
                             "--", "3"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "12.0\n"            # d(3 w²)/dw at w = 2, as plain python prints it
    assert (tmp_path / "out.json").read_text().startswith('{"schema": "tapeviz.recording/1"')
