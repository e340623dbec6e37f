"""Runtime audio -> face inference with onnxruntime (no torch).

The ONNX graph is one streaming step (see assets/model/export.py): new log-mel frames plus
the conv buffers in, face outputs plus new buffers out. `step()` keeps the buffers between
calls; `run_offline()` runs a whole sequence and compensates the model's lookahead, so
that output frame t depicts media time t * 10 ms.

The live models have one buffer input, `state`; the offline model has several (its live net's,
its wide-lookahead net's and a delay line), each a `state*` input with a `new_state*` output. The runtime
takes the buffers' shapes from the graph, so it runs either kind the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from studio.paths import asset_path

VARIANTS = ("fp32", "int8", "offline")  # live fp32 / int8, and the full-context offline model
N_MELS = 80
CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"


class FaceModelError(RuntimeError):
    """The face model file is missing or is not a face model this runtime can run."""


@dataclass(frozen=True)
class FaceOutput:
    arkit: np.ndarray  # (n, 52) weights 0..1, ARKit order
    visemes: np.ndarray  # (n, 15) OVR viseme probabilities
    voice_activity: np.ndarray  # (n,) probability 0..1

    def __len__(self) -> int:
        return len(self.arkit)


def default_model_path(variant: str) -> Path:
    if variant not in VARIANTS:
        raise ValueError(f"face model variant {variant!r} is not one of {', '.join(VARIANTS)}")
    return asset_path("models", f"face_{variant}.onnx")


def default_providers() -> list[str]:
    """CUDA first where onnxruntime offers it (the `gpu` extra, onnxruntime-gpu), then the CPU.

    onnxruntime-gpu lists CUDA even where no usable GPU or driver is found; the session then falls back
    to the CPU without raising, so `FaceModel.provider` says which one actually runs.
    """
    import onnxruntime

    cuda = [CUDA_PROVIDER] if CUDA_PROVIDER in onnxruntime.get_available_providers() else []
    return [*cuda, CPU_PROVIDER]


class FaceModel:
    """Streaming face model: `step()` one or more 10 ms log-mel frames at a time."""

    def __init__(
        self,
        variant: str = "fp32",
        path: str | Path | None = None,
        providers: list[str] | None = None,
        threads: int = 1,
    ) -> None:
        """`providers`: onnxruntime execution providers in priority order; by default `default_providers()`
        (CUDA first when onnxruntime offers it). Those onnxruntime lacks are left out, and the CPU is always last."""
        try:
            import onnxruntime
        except ImportError:
            raise FaceModelError(
                "onnxruntime is not installed: install the studio with its `cpu` extra (onnxruntime) "
                "or its `gpu` extra (onnxruntime-gpu)"
            ) from None

        self.variant = variant
        self.path = Path(path) if path is not None else default_model_path(variant)
        if not self.path.is_file():
            raise FaceModelError(f"face model file not found: {self.path}")
        available = onnxruntime.get_available_providers()
        wanted = [p for p in (providers or default_providers()) if p in available and p != CPU_PROVIDER]
        wanted.append(CPU_PROVIDER)
        self.requested_providers = wanted  # what the session was asked for; `providers` is what it runs on
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        try:
            self._session = onnxruntime.InferenceSession(str(self.path), options, providers=wanted)
        except Exception as error:  # onnxruntime raises several unrelated types for a bad file
            raise FaceModelError(f"cannot load face model {self.path}: {error}") from error
        self._check_signature()
        metadata = self._session.get_modelmeta().custom_metadata_map
        try:
            self._lookahead = int(metadata["lookahead_frames"])
        except (KeyError, ValueError) as error:
            raise FaceModelError(f"face model {self.path} lacks metadata {error}; re-export it") from error
        self._state_shapes = {i.name: tuple(i.shape) for i in self._session.get_inputs() if i.name != "features"}
        self._outputs = ["arkit", "visemes", "voice_activity"] + [f"new_{name}" for name in self._state_shapes]
        self.reset()

    def _check_signature(self) -> None:
        inputs = [i for i in self._session.get_inputs() if i.name != "features"]
        names = {i.name for i in self._session.get_inputs()}
        outputs = {o.name for o in self._session.get_outputs()}
        wanted = {"arkit", "visemes", "voice_activity"} | {f"new_{i.name}" for i in inputs}
        buffers_ok = all(i.name.startswith("state") and len(i.shape) == 3 and all(isinstance(d, int) for d in i.shape)
                         for i in inputs)
        if "features" not in names or not inputs or not buffers_ok or not wanted <= outputs:
            raise FaceModelError(
                f"{self.path} is not a streaming face model: inputs {sorted(names)}, outputs {sorted(outputs)}; "
                "expected inputs features and state (fixed shape), outputs arkit, visemes, voice_activity, new_state"
            )

    @property
    def providers(self) -> list[str]:
        """Execution providers actually active, in priority order (CUDA first when in use)."""
        return list(self._session.get_providers())

    @property
    def provider(self) -> str:
        """The execution provider that runs the model: CUDAExecutionProvider or CPUExecutionProvider."""
        return self.providers[0]

    @property
    def lookahead_frames(self) -> int:
        """How many hops the streamed output lags its input: the output of step() after frame t depicts t - this."""
        return self._lookahead

    def reset(self) -> None:
        """Start a new stream: forget all past audio."""
        self._states = self._zero_states()

    def _zero_states(self) -> dict[str, np.ndarray]:
        return {name: np.zeros(shape, np.float32) for name, shape in self._state_shapes.items()}

    def step(self, features: np.ndarray) -> FaceOutput:
        """Feed n new log-mel frames (n, 80); get the n outputs they complete (lagging by lookahead_frames)."""
        frames = self._check_features(features, "FaceModel.step")
        if frames.shape[0] == 0:
            return _empty_output()
        arkit, visemes, voice, *states = self._session.run(self._outputs, {"features": frames[None], **self._states})
        self._states = dict(zip(self._state_shapes, states))
        return FaceOutput(arkit[0], visemes[0], voice[0])

    def run_offline(self, features: np.ndarray) -> FaceOutput:
        """A whole utterance (T, 80) -> T outputs, output frame t depicting frame t (lookahead compensated).

        The last `lookahead_frames` outputs need audio after the end: it is padded with the
        last frame repeated (the utterance's own trailing sound, normally silence).
        """
        frames = self._check_features(features, "FaceModel.run_offline")
        n = frames.shape[0]
        if n == 0:
            return _empty_output()
        padded = np.concatenate([frames, np.repeat(frames[-1:], self._lookahead, axis=0)])
        arkit, visemes, voice, *_ = self._session.run(self._outputs, {"features": padded[None], **self._zero_states()})
        lag = self._lookahead
        return FaceOutput(arkit[0, lag : lag + n], visemes[0, lag : lag + n], voice[0, lag : lag + n])

    @staticmethod
    def _check_features(features: np.ndarray, what: str) -> np.ndarray:
        frames = np.asarray(features, np.float32)
        if frames.ndim != 2 or frames.shape[1] != N_MELS:
            raise ValueError(f"{what}: features must have shape (n, {N_MELS}), got {frames.shape}")
        if not np.all(np.isfinite(frames)):
            raise ValueError(f"{what}: features contain NaN or infinity")
        return np.ascontiguousarray(frames)


def _empty_output() -> FaceOutput:
    return FaceOutput(np.zeros((0, 52), np.float32), np.zeros((0, 15), np.float32), np.zeros(0, np.float32))
