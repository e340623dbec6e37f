import numpy as np
import pytest

from studio.engine.face_model import CPU_PROVIDER, CUDA_PROVIDER, FaceModel, FaceModelError, default_model_path
from studio.engine.features import LogMelExtractor


def _features(seconds: float = 3.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    bursts = (np.sin(2 * np.pi * 1.5 * t) > 0) * (0.3 * np.sin(2 * np.pi * 180 * t) + 0.05 * rng.standard_normal(t.size))
    return LogMelExtractor().compute(bursts.astype(np.float32))


@pytest.fixture(scope="module")
def fp32() -> FaceModel:
    return FaceModel("fp32")


def test_shipped_models_exist_and_are_single_files():
    for variant in ("fp32", "int8", "offline"):
        path = default_model_path(variant)
        assert path.is_file()
        assert not path.with_name(path.name + ".data").exists()


def test_streamed_steps_match_the_offline_pass(fp32):
    features = _features()
    offline = fp32.run_offline(features)
    assert offline.arkit.shape == (len(features), 52)
    assert offline.visemes.shape == (len(features), 15)
    assert offline.voice_activity.shape == (len(features),)
    fp32.reset()
    steps = [fp32.step(features[i : i + 1]) for i in range(len(features))]
    lag = fp32.lookahead_frames
    assert 0 <= lag <= 3
    streamed_arkit = np.concatenate([s.arkit for s in steps])
    streamed_visemes = np.concatenate([s.visemes for s in steps])
    np.testing.assert_allclose(streamed_arkit[lag:], offline.arkit[: len(features) - lag], atol=1e-4)
    np.testing.assert_allclose(streamed_visemes[lag:], offline.visemes[: len(features) - lag], atol=1e-4)


def test_the_shipped_offline_model_hears_further_ahead_and_streams_as_it_runs_whole(fp32):
    from studio.engine.offline import offline_variant

    model = FaceModel("offline")
    assert offline_variant() == "offline"  # lipsync, render --audio and take export use it
    assert model.lookahead_frames > 10 * fp32.lookahead_frames  # hears a /p/'s release after the closure
    features = _features(2.0, seed=7)
    whole = model.run_offline(features)
    np.testing.assert_allclose(whole.visemes.sum(axis=1), 1.0, atol=1e-4)
    model.reset()
    streamed = np.concatenate([model.step(features[i : i + 5]).arkit for i in range(0, len(features), 5)])
    lag = model.lookahead_frames
    np.testing.assert_allclose(streamed[lag:], whole.arkit[: len(features) - lag], atol=1e-4)


def test_steps_of_several_frames_match_single_frame_steps(fp32):
    features = _features(1.0, seed=3)
    fp32.reset()
    single = np.concatenate([fp32.step(features[i : i + 1]).arkit for i in range(len(features))])
    fp32.reset()
    chunked = np.concatenate([fp32.step(features[i : i + 7]).arkit for i in range(0, len(features), 7)])
    np.testing.assert_allclose(chunked, single, atol=1e-4)


def test_reset_forgets_the_past(fp32):
    features = _features(1.0, seed=5)
    fp32.reset()
    first = fp32.step(features[:20]).arkit
    fp32.step(features[20:])
    fp32.reset()
    np.testing.assert_allclose(fp32.step(features[:20]).arkit, first, atol=1e-6)


def test_outputs_are_probabilities(fp32):
    out = fp32.run_offline(_features(1.0))
    assert np.all((out.arkit >= 0) & (out.arkit <= 1))
    np.testing.assert_allclose(out.visemes.sum(1), 1.0, atol=1e-4)
    assert np.all((out.voice_activity >= 0) & (out.voice_activity <= 1))


def test_int8_loads_and_stays_close_to_fp32(fp32):
    int8 = FaceModel("int8")
    features = _features()
    reference = fp32.run_offline(features)
    quantized = int8.run_offline(features)
    assert int8.lookahead_frames == fp32.lookahead_frames
    assert np.abs(quantized.arkit - reference.arkit).mean() < 0.02
    # every weight within 0.25 of fp32's at the same hop or a neighbour: int8 may cross a sharp edge one hop early
    padded = np.pad(reference.arkit, ((1, 1), (0, 0)), mode="edge")
    nearest = np.min([np.abs(quantized.arkit - padded[shift:shift + len(quantized.arkit)]) for shift in range(3)], axis=0)
    assert nearest.max() < 0.25


@pytest.fixture
def onnxruntime_offering_cuda(monkeypatch):
    """onnxruntime as onnxruntime-gpu presents itself: CUDA listed. Each real session's `providers` is recorded."""
    import onnxruntime

    asked: list[list[str]] = []
    real_session = onnxruntime.InferenceSession

    def recording_session(path, options=None, providers=None, **kwargs):
        asked.append(list(providers))
        return real_session(path, options, providers=[p for p in providers if p != CUDA_PROVIDER], **kwargs)

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [CUDA_PROVIDER, CPU_PROVIDER])
    monkeypatch.setattr(onnxruntime, "InferenceSession", recording_session)
    return asked


def test_the_engine_and_lipsync_ask_for_cuda_first_when_onnxruntime_offers_it(onnxruntime_offering_cuda):
    from studio.engine.offline import StreamingAnalysis
    from studio.engine.pipeline import Engine

    engine = Engine()
    analysis = StreamingAnalysis()
    assert onnxruntime_offering_cuda == [[CUDA_PROVIDER, CPU_PROVIDER]] * 2
    assert engine.model.requested_providers == analysis.model.requested_providers == [CUDA_PROVIDER, CPU_PROVIDER]
    assert engine.face_provider == CPU_PROVIDER, "the session says what it runs on, not what it was asked for"


def test_without_cuda_only_the_cpu_is_asked_for_and_reported(monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [CPU_PROVIDER])  # the `cpu` extra's
    model = FaceModel("fp32", providers=[CUDA_PROVIDER, CPU_PROVIDER])
    assert model.requested_providers == [CPU_PROVIDER]
    assert model.providers == [CPU_PROVIDER] and model.provider == CPU_PROVIDER


def test_corrupt_model_file_error_names_the_file(tmp_path):
    bad = tmp_path / "broken_face.onnx"
    bad.write_bytes(b"this is not an onnx model")
    with pytest.raises(FaceModelError, match="broken_face.onnx"):
        FaceModel("fp32", path=bad)


def test_missing_model_file_error_names_the_file(tmp_path):
    with pytest.raises(FaceModelError, match="nowhere.onnx"):
        FaceModel(path=tmp_path / "nowhere.onnx")


def test_unknown_variant_names_allowed_values():
    with pytest.raises(ValueError, match="fp32, int8"):
        FaceModel("fp64")


def test_wrong_feature_shape_is_rejected(fp32):
    with pytest.raises(ValueError, match=r"\(n, 80\)"):
        fp32.step(np.zeros((3, 40), np.float32))
