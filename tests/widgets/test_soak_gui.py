"""`avatar-studio soak --gui`: a short scripted operator session in the real window really does every action
(persona and preset switches, persona edits, a spoken cue, hotkeys, a recorded take, its playback, an MP4
export that decodes) and reports memory, presented fps and underruns. Behaviour only: no figure is judged."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from studio.soak import gui_rss_growth
from tests.conftest import DISPLAY_PROBLEM


def test_a_short_gui_soak_does_every_operator_action_and_reports_memory_fps_and_underruns(tmp_path):
    if DISPLAY_PROBLEM:  # as every window test: fail with the reason, never pass unseen (make test starts Xvfb)
        pytest.fail(f"{DISPLAY_PROBLEM}: soak --gui opens the window; run `make test`, which starts Xvfb")
    env = dict(os.environ, AVATAR_STUDIO_HOME=str(tmp_path / "home"), QT_QPA_PLATFORM="xcb")
    result = subprocess.run([sys.executable, "-m", "widgets.app", "soak", "--gui", "--duration", "45", "--report",
                             str(tmp_path / "report")], capture_output=True, text=True, env=env, timeout=600)
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert result.returncode == 0, (report["problems"], report["pass"], result.stderr[-3000:])
    assert report["problems"] == []
    summary, counts = report["summary"], report["summary"]["counts"]
    for action in ("persona_switches", "preset_switches", "cues_spoken", "takes_recorded", "playbacks",
                   "exports_written"):
        assert counts[action] >= 1, action
    assert counts["persona_edits"] >= 3  # a colour, the body shape and a style value each cycle
    assert counts["hotkeys_pressed"] >= 2  # an expression key pressed on and pressed off
    assert counts["exports_decoded"] == counts["exports_written"] and counts["exported_frames"] > 0
    assert counts["exports_with_sound"] >= 1  # the take holds the spoken cue
    assert len(report["settings"]["personas"]) >= 2 and len(report["settings"]["presets"]) >= 2
    series = report["series"]
    assert len(series["time_s"]) >= 30  # a sample a second for the whole session
    assert len(series["rss_mb"]) == len(series["presented_fps"]) == len(series["audio_underruns"]) == len(series["time_s"])
    assert max(series["presented_fps"]) > 0  # the window kept presenting while the script ran
    assert isinstance(summary["gui_rss_growth_pct"], float) and summary["rss_at_warmup_mb"] > 0
    assert isinstance(summary["audio_underruns"], int) and summary["presented_fps_mean"] > 0
    assert report["pass"]["rss_growth"] is None  # 45 s is too short to judge memory, and the report says so
    assert (tmp_path / "report" / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gui_soak_without_a_display_exits_2_with_one_line(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "WAYLAND_DISPLAY")}
    result = subprocess.run([sys.executable, "-m", "widgets.app", "soak", "--gui", "--duration", "30", "--report",
                             str(tmp_path)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "DISPLAY" in result.stderr


def test_rss_growth_is_measured_after_the_warm_up_and_ignores_a_passing_spike():
    times = [float(t) for t in range(0, 900)]
    rss = [500.0 + min(t, 300.0) * 0.5 for t in times]  # grows during warm-up, flat after it
    rss[600] = 2000.0  # an export's buffers, freed a second later
    flat = gui_rss_growth(times, rss, warmup_s=300.0)
    assert flat["growth_pct"] == 0.0 and flat["baseline_mb"] == 650.0 and flat["max_mb"] == 2000.0
    growing = gui_rss_growth(times, [mb + max(t - 300.0, 0.0) * 0.1 for t, mb in zip(times, rss)], warmup_s=300.0)
    # 0.1 MB/s after the warm-up: the medians of 300-360 s and of the last 60 s (839-899 s) are 653 and 706.9 MB
    assert growing["growth_pct"] == pytest.approx(100 * (706.9 - 653.0) / 653.0, abs=0.1)
