"""`avatar-studio soak`: bad input exits 2 with one line; a short run writes report.json and report.png."""

import json
import os
import subprocess
import sys

import pytest

from widgets.app import main


def _one_line_exit_2(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    return error


def test_a_negative_duration_is_refused(capsys, tmp_path):
    error = _one_line_exit_2(capsys, ["soak", "--duration", "-10", "--report", str(tmp_path)])
    assert "duration" in error and "-10" in error


def test_an_unwritable_report_folder_is_refused(capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("keep me")
    error = _one_line_exit_2(capsys, ["soak", "--duration", "10", "--report", str(blocker / "reports")])
    assert "report folder" in error
    assert blocker.read_text() == "keep me"


def test_out_of_range_options_name_the_allowed_values(capsys, tmp_path):
    error = _one_line_exit_2(capsys, ["soak", "--duration", "10", "--drop-rate", "2", "--report", str(tmp_path)])
    assert "drop rate" in error and "0..0.5" in error


def test_a_short_soak_writes_a_report_with_units_in_its_keys_and_a_plot(tmp_path):
    """Identity renders every 10 s (the shortest interval allowed), so a 25 s run compares later renders with
    the first; with the anchor on, a small skew and bias, every check passes and the exit code says so."""
    from studio.presets import preset_by_name, save_yaml

    default = preset_by_name("default")
    preset = default.model_copy(update={"drift": default.drift.model_copy(update={"identity_interval_s": 10.0})})
    save_yaml(preset, tmp_path / "often.yaml")
    env = dict(os.environ, EGL_PLATFORM="surfaceless", QT_QPA_PLATFORM="offscreen")
    env.pop("DISPLAY", None)  # headless, as on a server
    report_dir = tmp_path / "report"
    result = subprocess.run([sys.executable, "-m", "widgets.app", "soak", "--duration", "25", "--skew-ppm", "200",
                             "--pose-bias", "1,0.1", "--preset", str(tmp_path / "often.yaml"), "--report",
                             str(report_dir)], capture_output=True, text=True, env=env, timeout=300)
    report = json.loads((report_dir / "report.json").read_text())
    failed = [name for name, ok in report["pass"].items() if ok is False]
    assert result.returncode == 0 and report["passed"], (failed, result.stderr[-2000:])
    summary = report["summary"]
    for key in ("duration_s", "max_root_drift_mm", "max_head_drift_deg", "max_av_offset_ms", "rss_growth_pct",
                "min_identity_ssim", "cpu_s", "wall_s"):
        assert key in summary
    assert summary["complete"] and summary["simulated_s"] == pytest.approx(25.0)
    assert summary["identity_renders"] >= 3 and summary["identity_checks"] >= 3  # at 0, 10 and 20 s
    assert report["pass"]["min_identity_ssim"] is True  # later renders against the first, not the first with itself
    assert summary["min_identity_ssim"] >= preset.drift.min_identity_ssim
    assert report["settings"]["pose_bias_mm_per_min"] == 1.0
    assert (report_dir / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_failed_soak_exits_1_and_says_which_check_failed(tmp_path):
    """The anchor off and a tracker biased 600 mm/min: the body drifts past its limit within 20 s."""
    env = dict(os.environ, EGL_PLATFORM="surfaceless", QT_QPA_PLATFORM="offscreen")
    env.pop("DISPLAY", None)
    result = subprocess.run([sys.executable, "-m", "widgets.app", "soak", "--duration", "20", "--no-anchor",
                             "--pose-bias", "600,0", "--report", str(tmp_path)], capture_output=True, text=True,
                            env=env, timeout=300)
    report = json.loads((tmp_path / "report.json").read_text())
    assert result.returncode == 1, result.stderr[-2000:]
    assert not report["passed"] and report["pass"]["max_root_drift_mm"] is False
    assert "FAIL: " in result.stdout and "max_root_drift_mm" in result.stdout


def test_gui_no_anchor_switches_the_presets_anchoring_off(monkeypatch):
    import widgets.main_window

    opened = {}
    monkeypatch.setattr(widgets.main_window, "run_gui", lambda avatar, preset, persona: opened.update(preset=preset) or 0)
    assert main(["gui", "--no-anchor", "--preset", "education"]) == 0
    assert opened["preset"].name == "education" and not opened["preset"].anchor.enabled
    assert main(["gui", "--preset", "education"]) == 0
    assert opened["preset"].anchor.enabled
