"""The layers point one way: widgets → render → studio; studio never loads Qt or vispy."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import studio

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold():
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout and "0 broken" in result.stdout


def test_importing_every_studio_module_loads_no_gui_or_heavy_library():
    modules = [m.name for m in pkgutil.walk_packages(studio.__path__, "studio.")]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in ('PySide6', 'vispy', 'pyqtgraph', 'torch', 'onnxruntime', 'av', 'render', 'widgets')"
        " if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"studio modules pulled in: {result.stdout.strip()}"
    assert len(modules) > 5
