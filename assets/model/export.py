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

import numpy as np
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


AVERAGED_OUTPUTS = OUTPUT_NAMES[:3]
MATCHING_METADATA = ("lookahead_frames", "live_delay_frames", "sample_rate", "hop", "win", "n_mels", "feature_frame_s")
"""What the members of an average must agree on: what a frame is, and which instant their output depicts."""


def average_models(members: list[Path], path: Path) -> Path:
    """One streaming graph whose outputs (shapes, viseme probabilities, voice activity) are the mean of several
    exported models'. Nets trained from other starts or on other data miss different closures and rounded
    sounds, so their mean misses fewer (the experiment log, twenty-second round).

    Each member keeps its own buffers: the first member's keep their names, member k's `state*` become
    `state_m{k}*` with their `new_` outputs (the runtime takes any `state*` input). The members must agree on
    `MATCHING_METADATA`; the average is refused otherwise, naming the files and the value that differs.
    """
    import onnx
    from onnx import helper, numpy_helper

    if len(members) < 2:
        raise ValueError(f"averaging needs at least two models, got {len(members)}")
    models = [onnx.load(str(member)) for member in members]
    metadata = [{p.key: p.value for p in model.metadata_props} for model in models]
    for key in MATCHING_METADATA:
        values = {str(member): meta.get(key) for member, meta in zip(members, metadata)}
        if len(set(values.values())) > 1:
            raise ValueError(f"cannot average models whose {key} differs: {values}")
    for member, meta in zip(members, metadata):
        if "averaged_models" in meta:
            raise ValueError(f"{member} is itself an average of {meta['averaged_models']} models; average the "
                             "models it was made from")
    graphs = [_renamed_member(model.graph, k) for k, model in enumerate(models)]
    share = numpy_helper.from_array(np.array(1.0 / len(models), np.float32), "member_share")
    nodes = [node for graph in graphs for node in graph.node]
    for name in AVERAGED_OUTPUTS:
        nodes.append(helper.make_node("Sum", [f"member{k}_{name}" for k in range(len(models))], [f"{name}_sum"]))
        nodes.append(helper.make_node("Mul", [f"{name}_sum", "member_share"], [name]))
    first = graphs[0]
    outputs = [_renamed_value(next(o for o in first.output if o.name == f"member0_{name}"), name)
               for name in AVERAGED_OUTPUTS]
    outputs += [o for graph in graphs for o in graph.output if o.name.startswith("new_")]
    inputs = list(first.input) + [i for graph in graphs[1:] for i in graph.input if i.name != "features"]
    graph = helper.make_graph(nodes, "averaged_face_model", inputs, outputs,
                              [t for g in graphs for t in g.initializer] + [share],
                              value_info=[v for g in graphs for v in g.value_info])
    model = helper.make_model(graph, opset_imports=models[0].opset_import)
    model.ir_version = models[0].ir_version
    averaged = dict(metadata[0])
    averaged["receptive_field_frames"] = str(max(int(meta["receptive_field_frames"]) for meta in metadata))
    averaged["averaged_models"] = str(len(models))
    _set_metadata(model, averaged)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path), save_as_external_data=False)
    return path


def _renamed_member(graph, k: int):
    """A copy of member k's graph with every name its own (`member{k}_...`), `features` shared, and its buffers
    named as `average_models` says."""
    import onnx

    graph = onnx.GraphProto.FromString(graph.SerializeToString())
    names = {"": "", "features": "features"}
    for value in graph.input:
        if value.name != "features":
            names[value.name] = value.name if k == 0 else value.name.replace("state", f"state_m{k}", 1)
    for value in graph.output:
        if value.name.startswith("new_"):
            names[value.name] = f"new_{names[value.name[4:]]}"

    def rename(name: str) -> str:
        return names.setdefault(name, f"member{k}_{name}")

    for index, node in enumerate(graph.node):
        node.name = f"member{k}_{index}_{node.name}"
        node.input[:] = [rename(name) for name in node.input]
        node.output[:] = [rename(name) for name in node.output]
    for collection in (graph.initializer, graph.value_info, graph.input, graph.output):
        for value in collection:
            value.name = rename(value.name)
    return graph


def _renamed_value(value, name: str):
    import onnx

    copy = onnx.ValueInfoProto()
    copy.CopyFrom(value)
    copy.name = name
    return copy


def average_folders(folders: list[Path], out_dir: Path) -> dict[str, Path]:
    """The average of the live models in `folders` (fp32, and its INT8), and of their offline models where
    every folder has one."""
    for folder in folders:
        if not (folder / "face_fp32.onnx").is_file():
            raise FileNotFoundError(f"{folder} has no face_fp32.onnx to average")
    fp32 = average_models([folder / "face_fp32.onnx" for folder in folders], out_dir / "face_fp32.onnx")
    paths = {"fp32": fp32, "int8": export_int8(fp32, out_dir / "face_int8.onnx")}
    if all((folder / "face_offline.onnx").is_file() for folder in folders):
        paths["offline"] = average_models([folder / "face_offline.onnx" for folder in folders],
                                          out_dir / "face_offline.onnx")
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Export a FaceNet checkpoint to streaming ONNX (fp32 + INT8), or "
                                                 "average exported models into one (--average).")
    parser.add_argument("checkpoint", type=Path, nargs="?", help="a FaceNet checkpoint (.pt) to export")
    parser.add_argument("--average", type=Path, nargs="+", metavar="FOLDER",
                        help="folders of exported models (face_fp32.onnx, face_offline.onnx): write their average "
                             "to --out (face_fp32, face_int8 and, where every folder has one, face_offline)")
    parser.add_argument("--out", type=Path, default=Path("assets/models"))
    args = parser.parse_args(argv)
    if (args.checkpoint is None) == (args.average is None):
        parser.error("give either a checkpoint or --average FOLDER FOLDER ...")
    if args.average:
        paths = average_folders(args.average, args.out)
    else:
        paths = export_all(load_checkpoint(args.checkpoint), args.out)
    print(json.dumps({k: str(v) for k, v in paths.items()}))


if __name__ == "__main__":
    main()
