"""Generate the default avatar, `assets/avatars/default.npz`, from procedural geometry.

A stylized, friendly full-body character in SMPL-X format (55 joints, joint regressor,
skin weights, 10 body-shape directions) with all 52 ARKit blendshapes. Deterministic:
running it again reproduces the committed file.

    python assets/build_default_avatar.py [--out PATH]

Jaw: `jawOpen` rotates the lower face, teeth and tongue about the jaw hinge, and the same
region is skinned to the `jaw` joint, so `jaw_pose` opens the mouth too. Drive one or the
other: both together double the opening (as with SMPL-X's own expression space).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from avatar_builder import body, head  # noqa: E402
from avatar_builder.face_shapes import JAW_HINGE, FaceRig, expression_dirs  # noqa: E402
from avatar_builder.geometry import Part, centroid_weights, symmetrise  # noqa: E402
from avatar_builder.palette import COLORS  # noqa: E402

from studio.avatar.io import save_avatar  # noqa: E402
from studio.avatar.model import AvatarModel, Material  # noqa: E402
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS  # noqa: E402

PART_NAMES = ("head", "lips", "eyes", "eyelids", "brows", "hair", "mouth", "teeth", "tongue", "skin", "shirt",
              "hands", "trousers", "shoes")
MATERIALS = {
    "head": Material(COLORS["skin"], 0.10, 16.0),
    "lips": Material(COLORS["lips"], 0.25, 30.0),
    "eyes": Material(COLORS["sclera"], 0.65, 80.0),
    "eyelids": Material(COLORS["skin"], 0.10, 16.0),
    "brows": Material(COLORS["brows"], 0.05, 8.0),
    "hair": Material(COLORS["hair"], 0.20, 20.0),
    "mouth": Material(COLORS["mouth"], 0.05, 8.0),
    "teeth": Material(COLORS["teeth"], 0.40, 40.0),
    "tongue": Material(COLORS["tongue"], 0.30, 30.0),
    "skin": Material(COLORS["skin"], 0.10, 16.0),
    "shirt": Material(COLORS["shirt"], 0.05, 8.0),
    "hands": Material(COLORS["skin"], 0.10, 16.0),
    "trousers": Material(COLORS["trousers"], 0.05, 8.0),
    "shoes": Material(COLORS["shoes"], 0.20, 20.0),
}
NUM_BETAS = 10
# stored precision, steps per metre: template 15 um, expressions 30 um, body shapes 0.24 mm per unit beta
TEMPLATE_GRID, EXPRESSION_GRID, SHAPE_GRID = 2.0 ** 16, 2.0 ** 15, 2.0 ** 12
# joint-regressor weights on a float32-exact grid: the last-bit noise of a CPU's BLAS rounds away, so every
# machine writes the same file (weights still place each joint within a micrometre of its target)
REGRESSOR_GRID = 2.0 ** 24
HEAD_SCALE = 1.10  # a slightly large head reads friendlier and keeps the face legible in a full-body shot
HEAD_PIVOT = np.array([0.0, head.HEAD_BOTTOM_Y, 0.0])
HEAD_KEYS = ("head", "eye", "upper_lid", "lower_lid", "brow", "ear", "hair", "upper_teeth", "lower_teeth", "tongue",
             "throat")


class Assembly:
    """Concatenates parts, remembering each part's vertex range and mirror twin."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, Part]] = []
        self.twins: list[np.ndarray] = []
        self.ranges: dict[str, np.ndarray] = {}
        self.count = 0

    def _add(self, key: str, part: Part) -> int:
        start = self.count
        self.parts.append((key, part))
        self.ranges[key] = np.arange(start, start + len(part.vertices))
        self.count += len(part.vertices)
        return start

    def add_symmetric(self, key: str, part: Part) -> None:
        twin = symmetrise(part)
        start = self._add(key, part)
        self.twins.append(twin + start)

    def add_pair(self, key: str, left: Part) -> None:
        """The left part and its mirror image; keys get `left_`/`right_` prefixes."""
        right = left.mirrored()
        left_start = self._add(f"left_{key}", left)
        right_start = self._add(f"right_{key}", right)
        n = len(left.vertices)
        self.twins += [np.arange(n) + right_start, np.arange(n) + left_start]

    def array(self, attribute: str) -> np.ndarray:
        return np.concatenate([getattr(part, attribute) for _, part in self.parts])

    def faces(self) -> np.ndarray:
        offsets = np.cumsum([0] + [len(p.vertices) for _, p in self.parts[:-1]])
        return np.concatenate([p.faces + o for (_, p), o in zip(self.parts, offsets)]).astype(np.int32)

    def tags(self) -> dict[str, np.ndarray]:
        keys = sorted({k for _, p in self.parts for k in p.tags if k not in ("finger_joints",)})
        out = {}
        for key in keys:
            pieces = []
            for _, part in self.parts:
                if key in part.tags:
                    pieces.append(part.tags[key])
                else:
                    width = next(p.tags[key].shape[1:] for _, p in self.parts if key in p.tags)
                    pieces.append(np.zeros((len(part.vertices), *width)))
            out[key] = np.concatenate(pieces)
        return out


def assemble() -> tuple[Assembly, np.ndarray]:
    assembly = Assembly()
    skin = head.head_skin()
    assembly.add_symmetric("head", skin)
    eye = head.eye_centre(skin)
    assembly.add_pair("eye", head.left_eyeball(eye))
    upper_lid, lower_lid = head.left_lids(eye)
    assembly.add_pair("upper_lid", upper_lid)
    assembly.add_pair("lower_lid", lower_lid)
    assembly.add_pair("brow", head.left_brow(skin))
    assembly.add_pair("ear", head.left_ear())
    assembly.add_symmetric("hair", head.hair_cap())
    for key, part in zip(("upper_teeth", "lower_teeth", "tongue"), head.teeth_and_tongue()):
        assembly.add_symmetric(key, part)
    assembly.add_symmetric("throat", head.throat_wall())
    assembly.add_symmetric("neck", body.neck())
    assembly.add_symmetric("torso", body.torso())
    assembly.add_pair("arm", body.left_arm())
    palm, *fingers = body.left_hand()
    assembly.add_pair("palm", palm)
    for name, finger in zip(("index", "middle", "ring", "pinky", "thumb"), fingers):
        assembly.add_pair(name, finger)
    assembly.add_pair("leg", body.left_leg())
    assembly.add_pair("shoe", body.left_shoe())
    return assembly, eye


def _labels(assembly: Assembly, vertices: np.ndarray, tags: dict[str, np.ndarray]) -> np.ndarray:
    labels = np.concatenate([np.full(len(p.vertices), PART_NAMES.index(p.label)) for _, p in assembly.parts])
    lips = (tags["skin"] > 0) & (head.lip_mask(vertices) > 0.5) & (vertices[:, 2] > 0.03)
    labels[lips] = PART_NAMES.index("lips")
    labels[tags["bag_ring"] > 0] = PART_NAMES.index("mouth")
    labels[tags.get("trousers", np.zeros(len(labels))) > 0] = PART_NAMES.index("trousers")
    labels[tags.get("bare", np.zeros(len(labels))) > 0] = PART_NAMES.index("skin")
    return labels.astype(np.uint8)


def _skin_weights(assembly: Assembly, rig: FaceRig) -> np.ndarray:
    weights = assembly.array("weights")
    jaw = rig.jaw
    moving = jaw > 0
    head_index, jaw_index = JOINT_INDEX["head"], JOINT_INDEX["jaw"]
    weights[moving, head_index] -= jaw[moving]
    weights[moving, jaw_index] += jaw[moving]
    return weights


def _head_mask(assembly: Assembly) -> np.ndarray:
    mask = np.zeros(assembly.count, bool)
    for key in HEAD_KEYS:
        for full in (key, f"left_{key}", f"right_{key}"):
            if full in assembly.ranges:
                mask[assembly.ranges[full]] = True
    return mask


def _enlarge_head(point: np.ndarray) -> np.ndarray:
    """Scale about the bottom of the head: the face is sculpted at natural size, then the whole head grows."""
    return HEAD_PIVOT + HEAD_SCALE * (point - HEAD_PIVOT)


def _regressor(assembly: Assembly, vertices: np.ndarray, still: np.ndarray, eye: np.ndarray) -> np.ndarray:
    """Each joint is a non-negative weighted mean of nearby vertices that no expression moves."""
    r = assembly.ranges
    flip = np.array([-1.0, 1.0, 1.0])
    head_region = np.concatenate([r["head"], r["neck"], r["hair"], r["left_ear"], r["right_ear"]])
    targets: dict[str, tuple[np.ndarray, np.ndarray, int]] = {
        "pelvis": (np.array([0.0, 0.93, -0.006]), r["torso"], 96),
        "spine1": (np.array([0.0, 1.04, -0.008]), r["torso"], 96),
        "spine2": (np.array([0.0, 1.16, -0.006]), r["torso"], 96),
        "spine3": (np.array([0.0, 1.28, -0.004]), r["torso"], 96),
        "neck": (np.array([0.0, 1.45, -0.018]), r["neck"], 64),
        "head": (np.array([0.0, 1.535, -0.018]), r["neck"], 64),
        "jaw": (_enlarge_head(JAW_HINGE), head_region, 120),
    }
    for side, sign in (("left", 1.0), ("right", -1.0)):
        mirror = np.array([sign, 1.0, 1.0])
        targets.update({
            f"{side}_hip": (body.HIP * mirror, r[f"{side}_leg"], 56),
            f"{side}_knee": (body.KNEE * mirror, r[f"{side}_leg"], 56),
            f"{side}_ankle": (body.ANKLE * mirror, r[f"{side}_leg"], 56),
            f"{side}_foot": (body.FOOT * mirror, r[f"{side}_shoe"], 48),
            f"{side}_collar": (np.array([0.075, 1.385, -0.02]) * mirror, r["torso"], 96),
            f"{side}_shoulder": (body.SHOULDER * mirror, r[f"{side}_arm"], 56),
            f"{side}_elbow": (body.ELBOW * mirror, r[f"{side}_arm"], 56),
            f"{side}_wrist": (body.WRIST * mirror, r[f"{side}_arm"], 56),
            f"{side}_eye_smplhf": (eye * mirror, head_region, 160),
        })
        for key, part in assembly.parts:
            if key.startswith("left_") and "finger_joints" in part.tags:
                finger = key[len("left_"):]
                for k, point in enumerate(part.tags["finger_joints"], start=1):
                    targets[f"{side}_{finger}{k}"] = (point * (flip if sign < 0 else 1.0), r[f"{side}_{finger}"], 28)
    regressor = np.zeros((NUM_JOINTS, len(vertices)))
    for name, (target, candidates, k) in targets.items():
        allowed = candidates[still[candidates]]
        order = allowed[np.argsort(((vertices[allowed] - target) ** 2).sum(axis=1), kind="stable")]
        while True:
            try:
                weights = centroid_weights(vertices[order[:k]], target)
                regressor[JOINT_INDEX[name], order[:k]] = _quantise(weights, REGRESSOR_GRID)
                break
            except ValueError:
                if k >= len(order):
                    raise ValueError(f"joint {name}: no still vertices surround {target}") from None
                k *= 2
    return regressor


def _shape_dirs(assembly: Assembly, vertices: np.ndarray, tags: dict[str, np.ndarray]) -> np.ndarray:
    """Ten body-shape directions: height, girth, shoulders, hips, head, arms, legs, torso, chest, neck."""
    r = assembly.ranges
    x, y, z = vertices.T
    sign = np.sign(x)
    dirs = np.zeros((len(vertices), 3, NUM_BETAS))

    def member(*keys):
        mask = np.zeros(len(vertices), bool)
        for key in keys:
            for full in (key, f"left_{key}", f"right_{key}"):
                if full in r:
                    mask[r[full]] = True
        return mask

    limbs = member("torso", "neck", "arm", "leg")
    arms = member("arm", "palm", "index", "middle", "ring", "pinky", "thumb")
    legs = member("leg", "shoe")
    head_parts = member("head", "eye", "upper_lid", "lower_lid", "brow", "ear", "hair", "upper_teeth",
                        "lower_teeth", "tongue")
    torso = member("torso")
    dirs[:, 1, 0] = 0.06 * y
    girth = (vertices - tags["axis"]) * 0.12
    belly = torso * (z > 0) * np.exp(-(((y - 1.08) / 0.12) ** 2)) * 0.025
    dirs[:, :, 1] = girth * limbs[:, None]
    dirs[:, 2, 1] += belly
    shoulder_region = torso * np.clip((np.abs(x) - 0.08) / 0.09, 0, 1) * np.clip((y - 1.25) / 0.10, 0, 1)
    dirs[:, 0, 2] = 0.025 * sign * (arms + shoulder_region)
    dirs[:, 0, 3] = 0.018 * sign * legs + 0.12 * x * torso * np.clip((1.10 - y) / 0.15, 0, 1)
    dirs[:, :, 4] = 0.08 * (vertices - np.array([0.0, 1.50, 0.0])) * head_parts[:, None]
    dirs[:, 0, 5] = 0.08 * sign * np.clip(np.abs(x) - 0.175, 0, 0.55) * arms
    dirs[:, 1, 6] = 0.08 * np.minimum(y, 0.93)
    dirs[:, 1, 7] = 0.10 * np.clip(y - 0.93, 0, 0.55)
    chest = torso * (z > 0) * np.exp(-(((y - 1.28) / 0.08) ** 2)) * np.exp(-((x / 0.12) ** 2))
    dirs[:, 2, 8] = 0.018 * chest
    dirs[:, 1, 9] = 0.03 * np.clip((y - 1.40) / 0.12, 0, 1)
    return dirs


def _quantise(values: np.ndarray, grid: float) -> np.ndarray:
    """Round to a fine grid (steps per metre): invisible, but the file compresses to half its size.

    Rounding is odd-symmetric, so mirrored shapes stay exact mirrors and zeros stay zero; adding 0.0 turns
    the -0.0 that mirroring leaves behind into +0.0, which breaks no runs of zero bytes.
    """
    return np.round(values * grid) / grid + 0.0


def build() -> AvatarModel:
    assembly, eye = assemble()
    vertices = assembly.array("vertices")
    tags = assembly.tags()
    twin = np.concatenate(assembly.twins)
    labels = _labels(assembly, vertices, tags)
    rig = FaceRig(vertices, labels, PART_NAMES, tags, twin, eye)
    expr = expression_dirs(rig)
    head_parts = _head_mask(assembly)
    vertices[head_parts] = _enlarge_head(vertices[head_parts])
    expr[head_parts] *= HEAD_SCALE
    expr = _quantise(expr, EXPRESSION_GRID)
    eye = _enlarge_head(eye)
    still = ~np.any(expr != 0, axis=(1, 2))
    regressor = _regressor(assembly, vertices, still, eye)
    return AvatarModel(
        name="default",
        v_template=_quantise(vertices, TEMPLATE_GRID).astype(np.float32),
        faces=assembly.faces(),
        joint_regressor=regressor.astype(np.float32),
        skin_weights=_skin_weights(assembly, rig).astype(np.float32),
        shape_dirs=_quantise(_shape_dirs(assembly, vertices, tags), SHAPE_GRID).astype(np.float32),
        expr_dirs=expr.astype(np.float32),
        part_labels=labels,
        part_names=PART_NAMES,
        materials=MATERIALS,
        vertex_colors=np.clip(assembly.array("colors"), 0, 1).astype(np.float32),
        source="assets/build_default_avatar.py",
    )


def mirror_map() -> np.ndarray:
    """Index of each vertex's mirror twin (x -> -x) in the generated avatar."""
    assembly, _ = assemble()
    return np.concatenate(assembly.twins)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "avatars" / "default.npz")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    model = build()
    save_avatar(model, args.out)
    print(f"{args.out}: {model.num_vertices} vertices, {len(model.faces)} triangles, "
          f"{args.out.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
