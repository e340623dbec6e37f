"""Averaging exported face models: one streaming graph whose outputs are the mean of its members', each member
streaming with its own buffers, refused where the members would depict different instants."""

import numpy as np
import pytest
import torch

from assets.model.export import average_folders, average_models, export_fp32, export_offline
from assets.model.net import FaceNet, OfflineFaceNet
from assets.model.train import load_onnx_weights
from studio.engine.face_model import FaceModel


def _live(path, seed: int, lookahead: int = 1, dilations=(1, 2)):
    torch.manual_seed(seed)
    return export_fp32(FaceNet(channels=8, dilations=dilations, lookahead=lookahead), path)


def _offline(path, seed: int):
    torch.manual_seed(seed)
    pair = OfflineFaceNet(FaceNet(channels=8, dilations=(1, 2), lookahead=1),
                          FaceNet(channels=8, dilations=(1, 2, 4), lookahead=4), classes=(1, 13, 14))
    return export_offline(pair, path)


def _streamed(model: FaceModel, features: np.ndarray, chunk: int):
    model.reset()
    outputs = [model.step(features[start:start + chunk]) for start in range(0, len(features), chunk)]
    return [np.concatenate([getattr(out, name) for out in outputs]) for name in ("arkit", "visemes", "voice_activity")]


@pytest.mark.parametrize("export", [_live, _offline], ids=["live", "offline"])
def test_an_average_streams_the_mean_of_its_members_outputs_each_member_with_its_own_buffers(tmp_path, export):
    members = [export(tmp_path / "a.onnx", 0), export(tmp_path / "b.onnx", 1)]
    average = FaceModel("fp32", path=average_models(members, tmp_path / "average.onnx"))
    first, second = (FaceModel("fp32", path=member) for member in members)
    features = np.random.default_rng(0).normal(size=(60, 80)).astype(np.float32)

    assert average.lookahead_frames == first.lookahead_frames
    assert len(average._state_shapes) == 2 * len(first._state_shapes)
    for chunk in (1, 7):
        averaged = _streamed(average, features, chunk)
        for got, a, b in zip(averaged, _streamed(first, features, chunk), _streamed(second, features, chunk)):
            assert not np.allclose(a, b, atol=1e-3)  # the members differ, so the mean is not either one's
            np.testing.assert_allclose(got, (a + b) / 2, atol=1e-5)


def test_models_that_depict_different_instants_are_not_averaged(tmp_path):
    members = [_live(tmp_path / "a.onnx", 0, lookahead=1), _live(tmp_path / "b.onnx", 1, lookahead=2)]

    with pytest.raises(ValueError, match="lookahead_frames differs.*a.onnx.*'1'.*b.onnx.*'2'"):
        average_models(members, tmp_path / "average.onnx")
    with pytest.raises(ValueError, match="at least two models"):
        average_models(members[:1], tmp_path / "average.onnx")
    assert not (tmp_path / "average.onnx").exists()


def test_members_of_other_depths_average_and_the_receptive_field_is_the_widest(tmp_path):
    import onnx

    members = [_live(tmp_path / "a.onnx", 0, dilations=(1, 2)), _live(tmp_path / "b.onnx", 1, dilations=(1, 2, 4, 8))]
    average = onnx.load(str(average_models(members, tmp_path / "average.onnx")))
    metadata = {p.key: p.value for p in average.metadata_props}

    assert metadata["receptive_field_frames"] == str(FaceNet(channels=8, dilations=(1, 2, 4, 8)).receptive_field_frames)
    assert metadata["averaged_models"] == "2"


def test_an_average_is_not_averaged_again(tmp_path):
    members = [_live(tmp_path / "a.onnx", 0), _live(tmp_path / "b.onnx", 1)]
    average = average_models(members, tmp_path / "average.onnx")

    with pytest.raises(ValueError, match="average.onnx is itself an average of 2 models"):
        average_models([average, members[0]], tmp_path / "again.onnx")


def test_a_warm_start_from_an_average_takes_its_first_members_weights_or_the_one_named(tmp_path):
    torch.manual_seed(0)
    first = FaceNet(channels=8, dilations=(1, 2), lookahead=1)
    torch.manual_seed(1)
    second = FaceNet(channels=8, dilations=(1, 2), lookahead=1)
    average = average_models([export_fp32(first, tmp_path / "a.onnx"), export_fp32(second, tmp_path / "b.onnx")],
                             tmp_path / "average.onnx")
    torch.manual_seed(2)
    warm = FaceNet(channels=8, dilations=(1, 2), lookahead=1)

    load_onnx_weights(warm, average)

    for name, value in first.state_dict().items():
        assert torch.equal(warm.state_dict()[name], value), name
        assert name.startswith("feature_") or not torch.equal(second.state_dict()[name], value), name

    load_onnx_weights(warm, average, member=1)  # the offline model's wide net grows from another member

    for name, value in second.state_dict().items():
        assert torch.equal(warm.state_dict()[name], value), name
    with pytest.raises(ValueError, match=r"average.onnx: no member 2 to start from; it holds 2 model\(s\)"):
        load_onnx_weights(warm, average, member=2)


def test_folders_average_their_live_int8_and_offline_models_and_a_folder_without_a_live_model_is_named(tmp_path):
    for k, name in enumerate(("one", "two")):
        _live(tmp_path / name / "face_fp32.onnx", k)
        _offline(tmp_path / name / "face_offline.onnx", k)
    (tmp_path / "empty").mkdir()

    paths = average_folders([tmp_path / "one", tmp_path / "two"], tmp_path / "out")

    assert sorted(paths) == ["fp32", "int8", "offline"]
    for variant, path in paths.items():
        assert FaceModel(variant, path=path).step(np.zeros((3, 80), np.float32)).arkit.shape == (3, 52)
    with pytest.raises(FileNotFoundError, match="empty has no face_fp32.onnx"):
        average_folders([tmp_path / "one", tmp_path / "empty"], tmp_path / "out2")
