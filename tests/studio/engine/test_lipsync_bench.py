"""The lipsync bench measures the command's own memory, not the bench's that launched it."""

from __future__ import annotations

import sys

import numpy as np

from studio.engine.lipsync_bench import run_measured, speed_figures


def test_peak_rss_is_the_commands_own_even_when_the_bench_process_is_large(tmp_path):
    ballast = np.ones(600 * 2**20 // 8)  # 600 MB the bench holds (renderers, models) when it launches lipsync
    code, _wall, cpu, rss_mb, stderr = run_measured(
        [sys.executable, "-c", "import sys; sys.stderr.write('said'); bytearray(80 * 2**20)"], tmp_path)
    assert ballast.sum() > 0
    assert code == 0 and stderr == "said"
    assert 80 < rss_mb < 300, f"peak RSS {rss_mb:.0f} MB is not the command's own"
    assert cpu > 0


def test_a_failing_command_keeps_its_exit_code_and_message(tmp_path):
    code, *_rest, stderr = run_measured([sys.executable, "-c", "import sys; sys.exit('no such audio file')"],
                                         tmp_path)
    assert code == 1 and stderr == "no such audio file"


def test_measured_commands_start_from_cached_bytecode_even_where_the_shell_forbids_writing_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    (tmp_path / "package").mkdir()
    (tmp_path / "package" / "measured_module.py").write_text("VALUE = 1\n")
    bytecode = tmp_path / "bytecode"
    command = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path / 'package')!r}); "
               "import measured_module"]
    code, *_rest = run_measured(command, bytecode)
    assert code == 0
    assert "measured_module" in {path.name.split(".")[0] for path in bytecode.rglob("*.pyc")}


def test_speed_is_the_median_run_and_the_slowest_run_is_reported_beside_it():
    figures = speed_figures(240.0, walls=[2.0, 3.0, 2.4], cpus=[1.9, 2.0, 2.2])
    assert figures["lipsync_realtime_factor"] == 100.0  # 240 s / 2.4 s, the median run
    assert figures["lipsync_slowest_realtime_factor"] == 80.0
    assert figures["lipsync_wall_s"] == 2.4
    assert figures["lipsync_cpu_realtime_factor"] == 120.0
    assert figures["lipsync_speed_runs_count"] == 3
