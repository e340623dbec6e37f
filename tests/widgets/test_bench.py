"""`avatar-studio bench` writes one JSON object: sections by area, units in the keys, machine and versions."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT = re.compile(r"_(ms|fps|s|pct|mb|px|hz)(_|$)")
COUNT = re.compile(r"(_count|_trials|_frames|_utterances|_intervals|_vertices|_triangles|_mae|_factor)$")


def _numeric_leaves(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _numeric_leaves(value, f"{prefix}{key}.")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield f"{prefix}{key}", key, value


def test_quick_bench_reports_every_area_with_units_in_the_keys(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "widgets.app", "bench", "--quick", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert json.loads(result.stdout) == report
    assert {"machine", "versions", "render", "engine", "face_model", "gui", "gpu", "levels", "presets"} <= set(report)
    for name in ("default", "medical", "education", "performance"):
        assert report["presets"][name]["engine_ms_per_hop"] > 0 and report["presets"][name]["render_fps"] > 0, name
    for module in ("face", "body", "hands", "cloth", "lod"):
        assert set(report["levels"][module]) == {"high", "medium", "low"}, module
    assert report["machine"]["cpu_count"] >= 1 and report["versions"]["onnxruntime"]
    for needed in ("render_1280x720_fps", "render_640x360_fps", "frame_time_p50_ms", "frame_time_p99_ms",
                   "cold_start_to_first_frame_s"):
        assert report["render"][needed] > 0, needed
    for needed in ("fp32_hop_median_ms", "fp32_hop_p99_ms", "int8_hop_median_ms", "text_to_first_lip_frame_ms",
                   "speech_to_photon_ms_median", "speech_to_photon_ms_p95", "speech_to_frame_ms_p95",
                   "speech_to_frame_from_capture_ms_p95", "speech_to_frame_from_callback_ms_p95"):
        assert report["engine"][needed] > 0, needed
    for needed in ("tts_heard_latency_ms_p50", "tts_heard_latency_ms_p95", "speaker_buffer_ms"):
        assert report["audio"][needed] > 0, needed
    for name in ("default", "medical", "education", "performance"):  # judged on sound→screen, as the window does
        preset = report["presets"][name]
        assert preset["meets_latency_target"] == (preset["sound_to_screen_ms"] <= preset["latency_target_ms"]), name
    for needed in ("engine_hop_with_recording_median_ms", "engine_hop_without_recording_median_ms",
                   "mp4_export_1280x720_realtime_pct"):
        assert report["recording"][needed] > 0, needed
    for needed in ("engine_hop_0_clients_median_ms", "engine_hop_1_client_median_ms", "engine_hop_8_clients_median_ms",
                   "engine_hop_1_stalled_client_median_ms", "frames_received_per_client_8_clients_fps"):
        assert report["api"][needed] > 0, needed
    for needed in ("vmc_send_ms_p50", "vmc_send_ms_p95", "livelink_send_ms_p95", "vmc_tracker_to_frame_ms_p50",
                   "vmc_tracker_to_frame_ms_p95", "livelink_tracker_to_frame_ms_p50", "livelink_tracker_to_frame_ms_p95",
                   "engine_hop_no_links_median_ms", "engine_hop_links_median_ms", "engine_hop_links_flooded_p99_ms"):
        assert report["interop"][needed] > 0, needed
    for needed in ("closure_recall_pct", "silent_mouth_at_rest_pct", "viseme_frame_accuracy_pct"):
        assert 0 <= report["face_model"][needed] <= 100, needed
    for path, key, value in _numeric_leaves(report):
        if path.startswith(("machine.", "versions.")):
            continue
        assert UNIT.search(key) or COUNT.search(key), f"{path}: a figure needs its unit in the key"
        assert math.isfinite(value), path
