"""Tracked faces and poses laid over the engine's own motion, region by region.

Receivers (VMC, Live Link Face) write what they decode into a `TrackerInput` from their own threads. The
engine's `TrackingMixer` reads it once per frame, before the expression layer and the anchor:

- each region (eyes and brows, mouth and jaw, head, body) comes from the tracker or from the voice/engine,
  as the operator picks; by default the tracker has the eyes, brows and head and the voice the mouth, so the
  p/b/m closures the speech makes stay exactly as the engine made them;
- face weights blend per channel toward the tracker's (channels a tracker never sent stay the engine's);
- the eye joints go with the eyes and brows: a tracker's eye rotations (Live Link Face's eye angles, VMC's
  LeftEye/RightEye bones) turn them on top of the gaze its eyeLook weights give, as an imported take's do;
- the head (neck, head) and body (pelvis, spines, root translation) go as offsets into the anchor's
  `LatestPose`, where SCA removes their drift; the engine's own motion in an owned region fades out;
  other tracked bones (arms, legs, fingers) replace the engine's where the tracker owns the body;
- no packet for `lost_after_s` (0.5 s): the tracked regions ease back to the engine's own motion and the
  state says "lost"; packets again: they ease back to the tracker.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from studio.avatar.arkit import NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX
from studio.engine.anchor import ANCHORED_INDEX, ANCHORED_JOINTS, LatestPose
from studio.engine.mouth_shaper import MOUTH_CHANNELS
from studio.recording.rotations import matrix_to_rotvec, rotvec_to_matrix

REGIONS = ("eyes_brows", "mouth_jaw", "head", "body")
REGION_LABELS = {"eyes_brows": "eyes and brows", "mouth_jaw": "mouth and jaw", "head": "head", "body": "body"}
SOURCES = ("tracker", "voice")
DEFAULT_SOURCES = {"eyes_brows": "tracker", "mouth_jaw": "voice", "head": "tracker", "body": "voice"}
LOST_AFTER_S = 0.5
EASE_S = 0.3

_MOUTH = np.zeros(NUM_ARKIT, bool)
_MOUTH[MOUTH_CHANNELS] = True
REGION_CHANNELS = {"eyes_brows": ~_MOUTH, "mouth_jaw": _MOUTH}  # the upper face (cheek squint, sneer) goes with the eyes
_HEAD_JOINTS = (JOINT_INDEX["neck"], JOINT_INDEX["head"])
_BODY_ANCHORED = tuple(JOINT_INDEX[name] for name in ANCHORED_JOINTS if name not in ("neck", "head"))
EYE_JOINTS = (JOINT_INDEX["left_eye_smplhf"], JOINT_INDEX["right_eye_smplhf"])
_NOT_REPLACED = set(ANCHORED_INDEX.tolist()) | {JOINT_INDEX["jaw"], *EYE_JOINTS}
_ANCHOR_SLOT = {int(joint): k for k, joint in enumerate(ANCHORED_INDEX)}


@dataclass
class TrackedSample:
    """What the tracker has sent so far (latest values), and when."""

    face: np.ndarray = field(default_factory=lambda: np.zeros(NUM_ARKIT))
    face_known: np.ndarray = field(default_factory=lambda: np.zeros(NUM_ARKIT, bool))
    bones: dict[int, np.ndarray] = field(default_factory=dict)  # joint index -> axis-angle (our frame)
    root: np.ndarray | None = None  # root translation, metres
    last_arrival: float | None = None  # monotonic seconds
    sequence: int = 0  # packets taken in


class TrackerInput:
    """The newest tracked face and pose, written by receivers on their threads, read by the engine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sample = TrackedSample()

    def put_face(self, weights: np.ndarray, head: np.ndarray | None, arrived: float,
                 eyes: np.ndarray | None = None) -> None:
        """52 weights in canonical order (NaN: not sent), the head's axis-angle when the tracker gives one, and
        the (2, 3) axis-angle of the left and right eye joints when it gives those."""
        weights = np.asarray(weights, np.float64)
        sent = ~np.isnan(weights)
        with self._lock:
            sample = self._sample
            face, known = sample.face.copy(), sample.face_known | sent
            face[sent] = weights[sent]
            bones = dict(sample.bones)
            if head is not None:
                bones[JOINT_INDEX["neck"]] = np.zeros(3)
                bones[JOINT_INDEX["head"]] = np.asarray(head, np.float64)
            if eyes is not None:
                for joint, rotation in zip(EYE_JOINTS, np.asarray(eyes, np.float64)):
                    bones[joint] = rotation
            self._sample = TrackedSample(face, known, bones, sample.root, arrived, sample.sequence + 1)

    def put_pose(self, bones: dict[int, np.ndarray], root: tuple[np.ndarray, np.ndarray] | None, arrived: float) -> None:
        """Bone rotations (joint index -> axis-angle) and the root (position, axis-angle; the rotation turns the hips)."""
        with self._lock:
            sample = self._sample
            merged = dict(sample.bones)
            merged.update({joint: np.asarray(value, np.float64) for joint, value in bones.items()})
            position = sample.root
            if root is not None:
                position = np.asarray(root[0], np.float64)
                if float(np.linalg.norm(root[1])) > 1e-9:
                    hips = np.asarray(bones.get(JOINT_INDEX["pelvis"], np.zeros(3)), np.float64)  # as sent, not turned yet
                    turned = rotvec_to_matrix(np.asarray(root[1])[None]) @ rotvec_to_matrix(hips[None])
                    merged[JOINT_INDEX["pelvis"]] = matrix_to_rotvec(turned)[0]
            self._sample = TrackedSample(sample.face, sample.face_known, merged, position, arrived, sample.sequence + 1)

    def sample(self) -> TrackedSample:
        with self._lock:
            return self._sample


def _smooth(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


class TrackingMixer:
    """The engine's tracker stage (see the module docstring); `attach(engine)` puts it in the pipeline.

    `state` is "waiting" (nothing received yet), "tracking" or "lost"; `status` says it in words.
    `latencies_ms` holds, for each frame that took in a new packet, the time from that packet's arrival
    to the frame (the tracker-to-frame latency).
    """

    def __init__(self, tracker: TrackerInput, sources: dict[str, str] | None = None, lost_after_s: float = LOST_AFTER_S,
                 ease_s: float = EASE_S, monotonic=time.monotonic) -> None:
        self.tracker = tracker
        self.sources = dict(DEFAULT_SOURCES)
        for region, source in (sources or {}).items():
            self.set_source(region, source)
        self.lost_after_s = float(lost_after_s)
        self.ease_s = float(ease_s)
        self.monotonic = monotonic
        self.pose_target = LatestPose()
        self.anchored = False  # whether the engine's anchor reads `pose_target` (else the offsets are added here)
        self.weights = dict.fromkeys(REGIONS, 0.0)
        self.state = "waiting"
        self.latencies_ms: deque[float] = deque(maxlen=4096)
        self._seen_sequence = 0
        self._last_time: float | None = None
        self._posing = False

    def set_source(self, region: str, source: str) -> None:
        """Where `region` takes its motion from: "tracker" or "voice" (the engine's own)."""
        if region not in REGIONS:
            raise ValueError(f"region {region!r} is not known; allowed: {', '.join(REGIONS)}")
        if source not in SOURCES:
            raise ValueError(f"source {source!r} for the {REGION_LABELS[region]} is not known; allowed: {', '.join(SOURCES)}")
        self.sources[region] = source

    def attach(self, engine) -> None:
        """Lay tracked motion over `engine`'s frames; its anchor (when it takes input) anchors the tracked pose."""
        anchor = engine.anchor
        self.anchored = hasattr(anchor, "pose_input")
        if self.anchored:
            anchor.pose_input = self.pose_target
        engine.tracking = self

    def detach(self, engine) -> None:
        if getattr(engine, "tracking", None) is self:
            engine.tracking = None
        if self.anchored and engine.anchor.pose_input is self.pose_target:
            engine.anchor.pose_input = None
        self.anchored = False

    @property
    def status(self) -> str:
        sample = self.tracker.sample()
        if self.state == "waiting":
            return "waiting for the tracker's first packet"
        if self.state == "lost" and sample.last_arrival is not None:
            return f"no packets from the tracker for {self.monotonic() - sample.last_arrival:.0f} s"
        return "tracking"

    # ------------------------------------------------------------ engine thread

    def mix(self, media_time_s: float, arkit: np.ndarray, pose: np.ndarray,
            transl: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        now = self.monotonic()
        sample = self.tracker.sample()
        if sample.sequence != self._seen_sequence and sample.last_arrival is not None:
            self._seen_sequence = sample.sequence
            self.latencies_ms.append((now - sample.last_arrival) * 1000.0)
        live = sample.last_arrival is not None and now - sample.last_arrival <= self.lost_after_s
        self.state = "tracking" if live else ("waiting" if sample.last_arrival is None else "lost")
        self._ease(now, live)
        out_arkit = np.array(arkit, np.float32)
        for region, channels in REGION_CHANNELS.items():
            weight = _smooth(self.weights[region])
            if weight > 0.0:
                mask = channels & sample.face_known
                out_arkit[mask] += (sample.face[mask] - out_arkit[mask]) * weight
        eyes = _smooth(self.weights["eyes_brows"])
        out_pose = np.array(pose, np.float32)
        for joint in EYE_JOINTS if eyes > 0.0 else ():
            if joint in sample.bones:
                out_pose[joint] += (sample.bones[joint] - out_pose[joint]) * eyes
        head, body = _smooth(self.weights["head"]), _smooth(self.weights["body"])
        if head == 0.0 and body == 0.0:
            if self._posing:
                self.pose_target.clear()
                self._posing = False
            return out_arkit, out_pose, transl
        rotations = np.zeros((len(ANCHORED_JOINTS), 3))
        for joints, weight in ((_HEAD_JOINTS, head), (_BODY_ANCHORED, body)):
            for joint in joints:
                out_pose[joint] *= 1.0 - weight
                if joint in sample.bones:
                    rotations[_ANCHOR_SLOT[joint]] = sample.bones[joint] * weight
        if body > 0.0:
            for joint, rotation in sample.bones.items():
                if joint not in _NOT_REPLACED:
                    out_pose[joint] += (rotation - out_pose[joint]) * body
        offset = sample.root * body if sample.root is not None else np.zeros(3)
        out_transl = np.asarray(transl, np.float32)
        if self.anchored:
            self.pose_target.put(rotations, offset)
            self._posing = True
        else:
            out_pose[ANCHORED_INDEX] += rotations.astype(np.float32)
            out_transl = out_transl + offset.astype(np.float32)
        return out_arkit, out_pose, out_transl

    def _ease(self, now: float, live: bool) -> None:
        dt = 0.0 if self._last_time is None else max(0.0, now - self._last_time)
        self._last_time = now
        step = dt / self.ease_s if self.ease_s > 0 else math.inf
        for region in REGIONS:
            target = 1.0 if live and self.sources[region] == "tracker" else 0.0
            current = self.weights[region]
            self.weights[region] = min(target, current + step) if target > current else max(target, current - step)
