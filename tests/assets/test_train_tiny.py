import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from assets.model.train import OFFLINE_LOOKAHEAD
from studio.engine.face_model import FaceModel
from studio.engine.features import LogMelExtractor

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_tiny_training_run_exports_onnx_models_that_load_and_stream(tmp_path):
    out = tmp_path / "models"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-m", "assets.model.train", "--tiny", "--out", str(out),
         "--checkpoint", str(tmp_path / "face.pt"), "--report", str(tmp_path / "report.md"), "--equaliser-db", "12"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for variant in ("fp32", "int8"):
        path = out / f"face_{variant}.onnx"
        assert path.is_file() and not path.with_name(path.name + ".data").exists()
        model = FaceModel(variant, path=path)
        rng = np.random.default_rng(0)
        out_frames = model.run_offline(LogMelExtractor().compute(0.1 * rng.standard_normal(16000)))
        assert out_frames.arkit.shape == (100, 52)
        assert np.all(np.isfinite(out_frames.arkit))
    offline = FaceModel("offline", path=out / "face_offline.onnx")
    live = FaceModel("fp32", path=out / "face_fp32.onnx")
    assert offline.lookahead_frames == OFFLINE_LOOKAHEAD > live.lookahead_frames  # hears the release after a closure
    features = LogMelExtractor().compute(0.1 * np.random.default_rng(1).standard_normal(16000))
    whole = offline.run_offline(features)
    streamed = np.concatenate([offline.step(features[k:k + 7]).arkit for k in range(0, len(features), 7)])
    lag = offline.lookahead_frames
    np.testing.assert_allclose(streamed[lag:], whole.arkit[:len(features) - lag], atol=1e-5)
    report = json.loads((tmp_path / "report.json").read_text())
    for key in ("viseme_frame_accuracy_pct", "closure_recall_pct", "silent_mouth_at_rest_pct",
                "hop_cost_fp32_median_ms", "hop_cost_int8_median_ms"):
        assert isinstance(report[key], float), key
    assert report["training"]["train_steps"] > 0
    assert report["training"]["equaliser_db"] == 12.0
    assert report["training"]["offline_model"]["train_steps"] > 0
    assert report["training"]["offline_model"]["lookahead_ms"] == OFFLINE_LOOKAHEAD * 10
    assert "offline_full_context" in report["articulation"] and "lipsync" in report["articulation"]
    assert (tmp_path / "report.md").read_text().startswith("# Face model report")
