"""One latency, sound→screen: the Preset panel judges the target on the same number the Latency dock shows.

The panel once summed the engine stages' p95 and the render p95 (47.9 ms, "meets the target") while the dock
showed render/present alone at 100-190 ms and the voice monitor measured 153 ms: the input device, the face
model's lookahead and the wait for the next presented frame were left out.
"""

from __future__ import annotations

import re

import pytest

from studio.telemetry import SOUND_TO_SCREEN

NUMBER = re.compile(re.escape(SOUND_TO_SCREEN) + r" p95 ([0-9.]+) ms")
ENGINE_STAGE_P95_MS = {"capture": 0.2, "features": 0.6, "inference": 1.1, "motion": 0.5, "anchor": 0.1}


def _snapshot(device_ms: float, lookahead_ms: float, total_p95_ms: float, buffer_ms: float) -> dict:
    """What a running engine's telemetry reads like (`EngineController.telemetry_snapshot`)."""
    stages = {stage: {"p50_ms": ms / 2, "p95_ms": ms, "p99_ms": ms * 1.5, "max_ms": ms * 2, "last_ms": ms / 2}
              for stage, ms in ENGINE_STAGE_P95_MS.items()}
    stages["total"] = {"p50_ms": total_p95_ms / 2, "p95_ms": total_p95_ms, "p99_ms": total_p95_ms * 1.5,
                       "max_ms": total_p95_ms * 2, "last_ms": total_p95_ms / 2}
    return {"stages": stages, "over_budget_count": 0, "cpu_pct": 50.0,
            "audio": {"output_underruns": 3, "input_overflows": 0},
            "latency": {"device_ms": device_ms, "lookahead_ms": lookahead_ms, "speaker_buffer_ms": buffer_ms}}


def test_the_preset_verdict_and_the_latency_dock_show_one_sound_to_screen_number(studio_window):
    window = studio_window()
    assert window.panels.select_preset("education")
    target = window.latency_model.target_ms
    assert target == 80
    model = window.latency_model
    for frame in range(90):  # 3 s presented at 30 fps, each frame 40 ms to render and present
        model.add_render_time(100.0 + frame / 30.0, 40.0)
    model.update(103.0, _snapshot(device_ms=25.0, lookahead_ms=20.0, total_p95_ms=3.0, buffer_ms=40.0))

    panel = window.panels.preset_panel
    assert not panel.update_verdict(), f"judged on something else than sound→screen: {panel.verdict_label.text()!r}"
    window.latency.refresh()
    dock_text = window.latency.sound_to_screen_label.text()
    verdict_text = panel.verdict_label.text()
    dock_number, panel_number = NUMBER.search(dock_text), NUMBER.search(verdict_text)
    assert dock_number and panel_number, (dock_text, verdict_text)
    assert dock_number.group(1) == panel_number.group(1)
    latency = model.sound_to_screen
    assert float(dock_number.group(1)) == pytest.approx(latency.total_ms, abs=0.05)
    # its parts, shown under the same name in both places: device + lookahead + engine + render + present
    assert latency.parts() == pytest.approx({"device": 25.0, "lookahead": 20.0, "engine": 3.0, "render": 40.0,
                                             "present": 1000.0 / 30.0}, abs=0.5)
    assert window.latency.sound_to_screen_parts.text() in verdict_text
    assert f"{target:.0f} ms" in dock_text and "misses the target" in verdict_text
    assert window.latency.buffer_label.text() == "Speaker buffer 40 ms"


def test_with_no_engine_running_there_is_no_sound_to_screen_figure_to_judge(studio_window):
    window = studio_window()
    window.latency_model.add_render_time(100.0, 12.0)
    window.latency_model.update(100.1, None, 10.0)
    window.latency.refresh()
    assert window.latency_model.sound_to_screen is None
    assert window.latency.sound_to_screen_label.text().startswith(f"{SOUND_TO_SCREEN} —")
    assert window.panels.preset_panel.update_verdict()
    assert "no latency measured yet" in window.panels.preset_panel.verdict_label.text()
