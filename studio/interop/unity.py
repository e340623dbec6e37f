"""Names and frames that VMC receivers (Unity humanoids) use, and how ours map onto them.

Frames. Ours (SMPL-X) is right-handed, y up, the avatar facing +z, +x the subject's left. Unity is
left-handed, y up, and a humanoid faces +z with +x on its right. So a point maps by mirroring x,
`(x, y, z) -> (-x, y, z)`, and a rotation R by the same mirror S on both sides, `R' = S R S`. For a
quaternion (x, y, z, w) that is `(x, -y, -z, w)`: a rotation axis is a pseudo-vector, so the mirror
negates the components it does not flip. The map is its own inverse, so receiving uses it too.

Bones. A VMC `/VMC/Ext/Bone/Pos` rotation is the bone's local rotation against a normalised humanoid
(every bone at identity in the T-pose), which is what an SMPL-X joint's axis-angle is against its
T-pose: the conversion is the frame mirror alone.

Blendshapes. Three namings: ARKit camelCase (`jawOpen`), "perfect sync" PascalCase (`JawOpen`, as
VSeeFace and VRM perfect-sync models name them) and the VRM 0.x presets, which are a coarse summary
of the 52 (see `vrm_weights`).
"""

from __future__ import annotations

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES, NUM_ARKIT
from studio.avatar.skeleton import JOINT_INDEX, JOINT_NAMES

BLEND_NAMINGS = ("arkit", "perfect_sync", "vrm")
PASCAL_NAMES: tuple[str, ...] = tuple(name[0].upper() + name[1:] for name in ARKIT_NAMES)
VRM_PRESETS: tuple[str, ...] = ("A", "I", "U", "E", "O", "Blink", "Blink_L", "Blink_R", "Joy", "Angry", "Sorrow", "Fun")

_FINGERS = {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "pinky": "Little"}
_SEGMENTS = {1: "Proximal", 2: "Intermediate", 3: "Distal"}


def _unity_bones() -> dict[str, str]:
    bones = {"pelvis": "Hips", "spine1": "Spine", "spine2": "Chest", "spine3": "UpperChest", "neck": "Neck",
             "head": "Head", "jaw": "Jaw", "left_eye_smplhf": "LeftEye", "right_eye_smplhf": "RightEye"}
    for side, unity_side in (("left", "Left"), ("right", "Right")):
        bones.update({f"{side}_hip": f"{unity_side}UpperLeg", f"{side}_knee": f"{unity_side}LowerLeg",
                      f"{side}_ankle": f"{unity_side}Foot", f"{side}_foot": f"{unity_side}Toes",
                      f"{side}_collar": f"{unity_side}Shoulder", f"{side}_shoulder": f"{unity_side}UpperArm",
                      f"{side}_elbow": f"{unity_side}LowerArm", f"{side}_wrist": f"{unity_side}Hand"})
        for finger, unity_finger in _FINGERS.items():
            for k, segment in _SEGMENTS.items():
                bones[f"{side}_{finger}{k}"] = f"{unity_side}{unity_finger}{segment}"
    return bones


UNITY_BONE: dict[str, str] = _unity_bones()  # SMPL-X joint -> Unity HumanBodyBones name, all 55
JOINT_OF_BONE: dict[str, int] = {bone: JOINT_INDEX[joint] for joint, bone in UNITY_BONE.items()}
SENT_JOINTS: tuple[str, ...] = JOINT_NAMES  # every joint we drive goes out, the pelvis as Hips
assert len(UNITY_BONE) == len(JOINT_NAMES)

_MIRROR_POINT = np.array((-1.0, 1.0, 1.0))
_MIRROR_QUAT = np.array((1.0, -1.0, -1.0, 1.0))  # (x, y, z, w)


def to_unity_position(points: np.ndarray) -> np.ndarray:
    """Our (..., 3) metres as Unity positions (x mirrored); also the inverse."""
    return np.asarray(points, np.float64) * _MIRROR_POINT


def rotvec_to_quat(rotvecs: np.ndarray) -> np.ndarray:
    """(..., 4) unit quaternions (x, y, z, w) of axis-angle (..., 3), in the same frame."""
    rotvecs = np.asarray(rotvecs, np.float64)
    angle = np.linalg.norm(rotvecs, axis=-1, keepdims=True)
    half = 0.5 * angle
    scale = np.where(angle > 1e-12, np.sin(half) / np.maximum(angle, 1e-12), 0.5)
    return np.concatenate([rotvecs * scale, np.cos(half)], axis=-1)


def quat_to_rotvec(quats: np.ndarray) -> np.ndarray:
    """(..., 3) axis-angle of quaternions (..., 4) (x, y, z, w), normalised first; the shorter way round."""
    q = np.asarray(quats, np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    q = np.where(q[..., 3:4] < 0.0, -q, q)
    sin_half = np.linalg.norm(q[..., :3], axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(sin_half, q[..., 3:4])
    scale = np.where(sin_half > 1e-12, angle / np.maximum(sin_half, 1e-12), 2.0)
    return q[..., :3] * scale


def to_unity_quat(rotvecs: np.ndarray) -> np.ndarray:
    """Our axis-angle rotations (..., 3) as Unity quaternions (..., 4) (x, y, z, w)."""
    return rotvec_to_quat(rotvecs) * _MIRROR_QUAT


def from_unity_quat(quats: np.ndarray) -> np.ndarray:
    """Unity quaternions (..., 4) (x, y, z, w) as our axis-angle (..., 3)."""
    return quat_to_rotvec(np.asarray(quats, np.float64) * _MIRROR_QUAT)


def _mean(weights: np.ndarray, *names: str) -> float:
    return float(np.mean([weights[ARKIT_INDEX[name]] for name in names]))


def vrm_weights(arkit: np.ndarray) -> dict[str, float]:
    """The VRM 0.x presets summarising 52 ARKit weights (a receiver without perfect sync shows these).

    Vowels from the mouth's opening, spread and rounding (scaled so they sum to at most 1, as VRM vowels
    are meant to be used one at a time); Blink is what both eyes share and Blink_L/R the rest of each;
    Joy the smile with squinting cheeks, Fun the smile without; Angry the lowered brows; Sorrow the frown.
    """
    w = np.clip(np.asarray(arkit, np.float64), 0.0, 1.0)
    opened = w[ARKIT_INDEX["jawOpen"]]
    spread = _mean(w, "mouthStretchLeft", "mouthStretchRight", "mouthSmileLeft", "mouthSmileRight")
    rounded = max(w[ARKIT_INDEX["mouthFunnel"]], w[ARKIT_INDEX["mouthPucker"]])
    vowels = np.array((opened * (1.0 - rounded) * (1.0 - spread),  # A
                       spread * (1.0 - opened),  # I
                       w[ARKIT_INDEX["mouthPucker"]] * (1.0 - opened),  # U
                       spread * opened,  # E
                       w[ARKIT_INDEX["mouthFunnel"]] * opened))  # O
    total = float(vowels.sum())
    if total > 1.0:
        vowels /= total
    left, right = w[ARKIT_INDEX["eyeBlinkLeft"]], w[ARKIT_INDEX["eyeBlinkRight"]]
    both = min(left, right)
    smile = _mean(w, "mouthSmileLeft", "mouthSmileRight")
    joy = min(smile, _mean(w, "cheekSquintLeft", "cheekSquintRight"))
    out = dict(zip(("A", "I", "U", "E", "O"), map(float, vowels)))
    out.update(Blink=float(both), Blink_L=float(left - both), Blink_R=float(right - both), Joy=float(joy),
               Angry=_mean(w, "browDownLeft", "browDownRight"), Sorrow=_mean(w, "mouthFrownLeft", "mouthFrownRight"),
               Fun=float(smile - joy))
    return out


# what each VRM preset puts back on the 52 when a tracker sends presets instead of ARKit names
VRM_TO_ARKIT: dict[str, tuple[str, ...]] = {
    "A": ("jawOpen",), "I": ("mouthStretchLeft", "mouthStretchRight"), "U": ("mouthPucker",),
    "E": ("mouthStretchLeft", "mouthStretchRight", "jawOpen"), "O": ("mouthFunnel", "jawOpen"),
    "Blink": ("eyeBlinkLeft", "eyeBlinkRight"), "Blink_L": ("eyeBlinkLeft",), "Blink_R": ("eyeBlinkRight",),
    "Joy": ("mouthSmileLeft", "mouthSmileRight", "cheekSquintLeft", "cheekSquintRight"),
    "Angry": ("browDownLeft", "browDownRight"), "Sorrow": ("mouthFrownLeft", "mouthFrownRight", "browInnerUp"),
    "Fun": ("mouthSmileLeft", "mouthSmileRight"),
}
# VRM 1.0 renamed the presets; senders use either
VRM1_ALIASES = {"aa": "A", "ih": "I", "ou": "U", "ee": "E", "oh": "O", "blinkLeft": "Blink_L", "blinkRight": "Blink_R",
                "happy": "Joy", "sad": "Sorrow", "relaxed": "Fun"}
VRM_TO_ARKIT_INDEX: dict[str, np.ndarray] = {
    key.lower(): np.array([ARKIT_INDEX[n] for n in VRM_TO_ARKIT[VRM1_ALIASES.get(key, key)]])
    for key in (*VRM_TO_ARKIT, *VRM1_ALIASES)}


def blend_values(arkit: np.ndarray, naming: str) -> list[tuple[str, float]]:
    """(name, value) pairs for `/VMC/Ext/Blend/Val` in one of BLEND_NAMINGS."""
    if naming == "vrm":
        return list(vrm_weights(arkit).items())
    if naming not in BLEND_NAMINGS:
        raise ValueError(f"blendshape naming {naming!r} is not known; allowed: {', '.join(BLEND_NAMINGS)}")
    names = ARKIT_NAMES if naming == "arkit" else PASCAL_NAMES
    values = np.asarray(arkit, np.float64).reshape(NUM_ARKIT)
    return list(zip(names, map(float, values)))
