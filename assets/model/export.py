"""Export a trained FaceNet to one self-contained streaming ONNX graph, fp32 and INT8.

Graph inputs: `features` (1, k, 80) raw log-mel and `state` (1, S, C) conv buffers; outputs:
`arkit` (1, k, 52), `visemes` (1, k, 15) probabilities, `voice_activity` (1, k) and
`new_state`. k is dynamic: k = 1 streams one hop, k = T with a zero state is the offline pass.
Metadata props carry what the runtime needs (lookahead, state shape, feature settings).

The offline model (live net + wide-lookahead net, `export_offline`) has three buffer inputs, `state`,
`state_wide` and `state_delay`, each with its `new_` output; the runtime reads their shapes
from the graph.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from assets.model.net import FaceNet, OfflineFaceNet, StreamingExport

INPUT_NAMES = ["features", "state"]
OUTPUT_NAMES = ["arkit", "visemes", "voice_activity", "new_state"]


def load_checkpoint(path: Path) -> FaceNet:
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    net = FaceNet(**checkpoint["config"])
    net.load_state_dict(checkpoint["state_dict"])
    return net.eval()


def model_metadata(net: FaceNet) -> dict[str, str]:
    return {
        "lookahead_frames": str(net.lookahead),
        "state_channels": str(net.channels),
        "state_frames": str(net.state_frames),
        "receptive_field_frames": str(net.receptive_field_frames),
        "sample_rate": "16000",
        "hop": "160",
        "win": "400",
        "n_mels": "80",
        "feature_frame_s": "0.01",
    }


def _set_metadata(model, metadata: dict[str, str]) -> None:
    import onnx

    del model.metadata_props[:]
    for key, value in metadata.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)


def export_fp32(net: FaceNet, path: Path) -> Path:
    """One .onnx file with the weights inside (no external .onnx.data)."""
    import onnx

    net = net.eval()
    features = torch.zeros(1, 4, 80)
    state = net.initial_state(1)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        raw_path = Path(scratch) / "raw.onnx"
        torch.onnx.export(
            StreamingExport(net),
            (features, state),
            str(raw_path),
            input_names=INPUT_NAMES,
            output_names=OUTPUT_NAMES,
            dynamic_axes={"features": {1: "frames"}, "arkit": {1: "frames"}, "visemes": {1: "frames"},
                          "voice_activity": {1: "frames"}},
            opset_version=17,
            dynamo=False,
        )
        model = onnx.load(str(raw_path))
    _set_metadata(model, model_metadata(net))
    onnx.save_model(model, str(path), save_as_external_data=False)
    return path


def export_offline(net: OfflineFaceNet, path: Path) -> Path:
    """The live net and the wide-lookahead net as one streaming graph (fp32, weights inside)."""
    import onnx

    net = net.eval()
    states = net.initial_states(1)
    state_names = ["state", "state_wide", "state_delay"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        raw_path = Path(scratch) / "raw.onnx"
        torch.onnx.export(
            net,
            (torch.zeros(1, 4, 80), *states),
            str(raw_path),
            input_names=["features", *state_names],
            output_names=OUTPUT_NAMES[:3] + [f"new_{name}" for name in state_names],
            dynamic_axes={"features": {1: "frames"}, "arkit": {1: "frames"}, "visemes": {1: "frames"},
                          "voice_activity": {1: "frames"}},
            opset_version=17,
            dynamo=False,
        )
        model = onnx.load(str(raw_path))
    metadata = model_metadata(net.live)
    metadata.update({
        "lookahead_frames": str(net.lookahead),
        "live_delay_frames": str(net.delay),
        "receptive_field_frames": str(max(net.live.receptive_field_frames + net.delay, net.wide.receptive_field_frames)),
    })
    _set_metadata(model, metadata)
    onnx.save_model(model, str(path), save_as_external_data=False)
    return path


def export_int8(fp32_path: Path, path: Path) -> Path:
    """Dynamic INT8 weights. QUInt8 + per-channel + reduce_range: the QInt8 default ran ~3x slower."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    metadata = {p.key: p.value for p in onnx.load(str(fp32_path)).metadata_props}
    with tempfile.TemporaryDirectory() as scratch:
        raw_path = Path(scratch) / "int8.onnx"
        quantize_dynamic(str(fp32_path), str(raw_path), weight_type=QuantType.QUInt8, per_channel=True,
                         reduce_range=True)
        model = onnx.load(str(raw_path))
    metadata["quantization"] = "dynamic-uint8-per-channel-reduce-range"
    _set_metadata(model, metadata)
    onnx.save_model(model, str(path), save_as_external_data=False)
    return path


def export_all(net: FaceNet, out_dir: Path) -> dict[str, Path]:
    fp32 = export_fp32(net, out_dir / "face_fp32.onnx")
    int8 = export_int8(fp32, out_dir / "face_int8.onnx")
    return {"fp32": fp32, "int8": int8}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Export a FaceNet checkpoint to streaming ONNX (fp32 + INT8).")
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--out", type=Path, default=Path("assets/models"))
    args = parser.parse_args(argv)
    paths = export_all(load_checkpoint(args.checkpoint), args.out)
    print(json.dumps({k: str(v) for k, v in paths.items()}))


if __name__ == "__main__":
    main()
