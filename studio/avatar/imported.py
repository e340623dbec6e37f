"""A glTF/GLB/VRM avatar adapted to the studio's AvatarModel, so FrameState drives it like the default avatar.

- Geometry: every triangle primitive, in the file's rest pose (skinned meshes in their bind pose), in one mesh.
- Skeleton: the humanoid bones (VRM's map, or a guess from node names for plain glTF) become the SMPL-X joints
  they correspond to (head, neck, spine, eyes, arms, legs, fingers). Every other skin joint (hair, skirt,
  accessories) rides on its nearest humanoid ancestor. VRM rest poses are T-poses with world-aligned bones, the
  SMPL-X convention, so a FrameState joint rotation turns the same body part. Joint positions come from the
  nodes: one extra, never-drawn vertex per joint carries it, and the joint regressor reads that vertex.
- Face: each of the 52 ARKit shapes is the morph target or expression of that name (any case or separator, or
  a "perfect sync" name); shapes that are missing fall back to the VRM vowels (aa ih ou ee oh from jawOpen,
  mouthStretch, mouthPucker, mouthSmile, mouthFunnel), blinks and look expressions. `info["mapping"]` says which.
  The VRM emotions (happy, angry, sad, relaxed, surprised; 0.x Joy, Angry, Sorrow, Fun) become extra expression
  columns that `studio.avatar.emotions` drives from the ARKit weights, with their isBinary and override rules.
- Spring bones: the VRM chains, their parameters and colliders become a `SpringRig` (`studio.avatar.springs`);
  each vertex follows its own chain's joint displacements at its place along the chain (`_spring_places`; the
  per-region weights of `_spring_weights` remain for the cloth anchors and region offsets).
- Look: base colour factor (times COLOR_0) per vertex, base colour textures packed in one atlas, alpha mask.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES, NUM_ARKIT, arkit_index
from studio.avatar.emotions import EMOTION_SOURCES, EMOTIONS, ExpressionDrive
from studio.avatar.gltf import GltfScene, read_gltf
from studio.avatar.material_binds import MaterialBinds, bound_materials, undrawn_binds
from studio.avatar.model import AvatarModel
from studio.avatar.mtoon import mtoon_extras
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS, PARENTS
from studio.avatar.skinning import Kinematics, batch_rodrigues
from studio.avatar.springs import SpringRig
from studio.avatar.vrm import Expression, SpringChain, VrmInfo, guess_humanoid, read_vrm

_FINGERS = {"Thumb": ("Metacarpal", "Proximal", "Distal"), "Index": ("Proximal", "Intermediate", "Distal"),
            "Middle": ("Proximal", "Intermediate", "Distal"), "Ring": ("Proximal", "Intermediate", "Distal"),
            "Little": ("Proximal", "Intermediate", "Distal")}
_SMPLX_FINGER = {"Thumb": "thumb", "Index": "index", "Middle": "middle", "Ring": "ring", "Little": "pinky"}
HUMANOID_TO_SMPLX: dict[str, str] = {
    "hips": "pelvis", "spine": "spine1", "chest": "spine2", "upperChest": "spine3", "neck": "neck", "head": "head",
    "jaw": "jaw", "leftEye": "left_eye_smplhf", "rightEye": "right_eye_smplhf",
    **{f"{side}{part}": f"{side}_{joint}" for side in ("left", "right") for part, joint in (
        ("UpperLeg", "hip"), ("LowerLeg", "knee"), ("Foot", "ankle"), ("Toes", "foot"), ("Shoulder", "collar"),
        ("UpperArm", "shoulder"), ("LowerArm", "elbow"), ("Hand", "wrist"))},
    **{f"{side}{finger}{segment}": f"{side}_{_SMPLX_FINGER[finger]}{k + 1}" for side in ("left", "right")
       for finger, segments in _FINGERS.items() for k, segment in enumerate(segments)},
}
# ARKit shape -> (VRM expression, weight) used when the avatar has no shape of that ARKit name.
VOWEL_FALLBACK: dict[str, tuple[tuple[str, float], ...]] = {
    "jawOpen": (("aa", 1.0),),
    "mouthFunnel": (("oh", 0.8),),
    "mouthPucker": (("ou", 0.8),),
    "mouthStretchLeft": (("ih", 0.5),), "mouthStretchRight": (("ih", 0.5),),
    "mouthSmileLeft": (("ee", 0.3),), "mouthSmileRight": (("ee", 0.3),),
    "eyeBlinkLeft": (("blinkLeft", 1.0),), "eyeBlinkRight": (("blinkRight", 1.0),),
    "eyeLookUpLeft": (("lookUp", 0.5),), "eyeLookUpRight": (("lookUp", 0.5),),
    "eyeLookDownLeft": (("lookDown", 0.5),), "eyeLookDownRight": (("lookDown", 0.5),),
    "eyeLookOutLeft": (("lookLeft", 0.5),), "eyeLookInRight": (("lookLeft", 0.5),),
    "eyeLookInLeft": (("lookRight", 0.5),), "eyeLookOutRight": (("lookRight", 0.5),),
}
_ATLAS_CELL = 1024  # largest side of one texture in the atlas
_ATLAS_PAD = 2


def load_gltf_avatar(path: str | os.PathLike) -> AvatarModel:
    """A `.glb`/`.gltf`/`.vrm` file as an AvatarModel; AvatarFormatError names the file and why it was refused."""
    scene, vrm, arkit, bones, mapping_file = _read_with_mapping(path)
    return avatar_from_scene(scene, vrm, arkit, bones, mapping_file)


def _read_with_mapping(path: str | os.PathLike):
    from studio.avatar.mapping_file import mapping_path, read_mapping

    scene = read_gltf(path)
    vrm = read_vrm(scene)
    mapping_file = mapping_path(path)
    if not mapping_file.is_file():
        return scene, vrm, {}, {}, None
    return (scene, vrm, *read_mapping(mapping_file, scene, vrm, tuple(HUMANOID_TO_SMPLX)), mapping_file)


def current_mapping_text(path: str | os.PathLike) -> str:
    """The mapping the studio uses for this avatar now (automatic, plus its mapping file), as mapping-file YAML."""
    from studio.avatar.mapping_file import mapping_text

    scene, vrm, arkit, bones, _ = _read_with_mapping(path)
    by_name, fallback = automatic_mapping(scene, vrm)
    chosen = {shape: arkit.get(shape, by_name.get(shape, fallback.get(shape, []))) for shape in ARKIT_NAMES}
    humanoid = _humanoid(scene, vrm, bones)
    return mapping_text(chosen, {bone: scene.node_names[node] for bone, node in humanoid.items()})


def automatic_humanoid(scene: GltfScene, vrm: VrmInfo) -> dict[str, int]:
    """Humanoid bone -> node before any mapping file: VRM's map, else a guess from the node names."""
    return dict(vrm.humanoid) if vrm.humanoid else guess_humanoid(scene, set(range(len(scene.parents))))


def _humanoid(scene: GltfScene, vrm: VrmInfo, bones: dict[str, int]) -> dict[str, int]:
    """The automatic map with a mapping file's bones over it (a negative node: the file says the bone is not driven)."""
    humanoid = automatic_humanoid(scene, vrm)
    humanoid.update(bones)
    return {bone: node for bone, node in humanoid.items() if node >= 0}


def avatar_from_scene(scene: GltfScene, vrm: VrmInfo, overrides: dict | None = None, bones: dict[str, int] | None = None,
                      mapping_file: Path | None = None) -> AvatarModel:
    """The AvatarModel of a read scene; `overrides` (ARKit shape -> sources) and `bones` come from a mapping file."""
    overrides = overrides or {}
    offsets = np.cumsum([0] + [len(p.positions) for p in scene.primitives])
    count = int(offsets[-1])
    positions = np.concatenate([p.positions for p in scene.primitives])
    faces = np.concatenate([p.triangles + offsets[i] for i, p in enumerate(scene.primitives)])

    humanoid = _humanoid(scene, vrm, bones or {})
    smplx_of_node = {node: JOINT_INDEX[HUMANOID_TO_SMPLX[bone]] for bone, node in humanoid.items()
                     if bone in HUMANOID_TO_SMPLX}
    joints = _joint_positions(scene, smplx_of_node, positions)
    weights = np.zeros((count + NUM_JOINTS, NUM_JOINTS), np.float32)
    node_weights = []  # per primitive: (node indices (N, 4), weights (N, 4)), for the spring bones
    for i, piece in enumerate(scene.primitives):
        rows = np.arange(offsets[i], offsets[i + 1])
        if piece.joints is None:
            weights[rows, _ride(scene, smplx_of_node, piece.node)] = 1.0
            node_weights.append((np.full((len(rows), 1), piece.node), np.ones((len(rows), 1), np.float32)))
            continue
        node_weights.append((piece.joints, piece.weights))
        for k in range(4):
            targets = np.array([_ride(scene, smplx_of_node, int(n)) for n in piece.joints[:, k]])
            np.add.at(weights, (rows, targets), piece.weights[:, k])
    weights[count:] = np.eye(NUM_JOINTS, dtype=np.float32)
    regressor = np.zeros((NUM_JOINTS, count + NUM_JOINTS), np.float32)
    regressor[:, count:] = np.eye(NUM_JOINTS, dtype=np.float32)

    cloth = _spring_weights(scene, vrm, smplx_of_node, node_weights, positions)
    places = _spring_places(scene, vrm, node_weights, positions)
    springs = _spring_rig(scene, vrm, smplx_of_node)
    expr, mapping, drive = _expressions(scene, vrm, offsets, count, overrides)
    binds, material_slot = _material_binds(scene, vrm, count, overrides)
    colors, uvs, rects, alpha, atlas, shading = _look(scene, count, set() if binds is None else set(binds.materials))
    rim, outline, blend_group, blend_queue, uv_motion = mtoon_extras(scene)
    pad = lambda array, fill=0.0: np.vstack([array, np.full((NUM_JOINTS, array.shape[1]), fill, array.dtype)])  # noqa: E731
    has_face = bool(np.abs(expr).max(initial=0.0) > 0)
    notes = list(scene.notes)
    if not has_face:
        notes.append("this avatar has no face morphs: only its head and body will move")
    if undrawn_binds(vrm.expressions):
        notes.append("expression colour binds not drawn (only base colours are): " + ", ".join(undrawn_binds(vrm.expressions)))
    missing_bones = [b for b in ("head", "neck", "hips") if b not in humanoid]
    if missing_bones:
        notes.append(f"no humanoid bone found for {', '.join(missing_bones)}: those parts do not move")
    info = {
        "format": f"VRM {vrm.version}" if vrm.version else "glTF",
        "meta": dict(vrm.meta),
        "mapping": mapping["kind"],
        "arkit_missing": mapping["missing"],
        "fallback": mapping["fallback"],
        "humanoid": sorted(humanoid),
        "look_at": vrm.look_at,
        "emotions": [] if drive is None else list(drive.emotions),
        "spring_chains": 0 if springs is None else springs.chains,
        "spring_colliders": 0 if springs is None else len(springs.collider_radius),
        "notes": notes,
        "mapping_file": str(mapping_file) if mapping_file is not None else None,
    }
    return _to_t_pose(AvatarModel(
        name=vrm.meta.get("title") or scene.path.stem,
        v_template=np.vstack([positions, joints]).astype(np.float32),
        faces=faces.astype(np.int32),
        joint_regressor=regressor,
        skin_weights=weights,
        shape_dirs=np.zeros((count + NUM_JOINTS, 3, 0), np.float32),
        expr_dirs=np.concatenate([expr, np.zeros((NUM_JOINTS, 3, expr.shape[2]), np.float32)]),
        expression_drive=drive,
        vertex_colors=pad(colors, 1.0),
        has_arkit_expressions=has_face,
        source=str(scene.path),
        uvs=pad(uvs), texture=atlas, texture_rects=pad(rects), alpha=pad(alpha, 1.0),
        cloth_weights=None if cloth is None else pad(cloth),
        spring_place=None if places is None else pad(places),
        spring_bones=springs,
        shading=None if shading is None else pad(shading),
        rim=None if rim is None else pad(rim), outline=None if outline is None else pad(outline),
        blend_group=None if blend_group is None else np.concatenate([blend_group, np.full(NUM_JOINTS, -1, np.int32)]),
        blend_queue=None if blend_queue is None else pad(blend_queue),
        uv_motion=None if uv_motion is None else pad(uv_motion),
        material_binds=binds,
        material_slot=None if material_slot is None else np.concatenate([material_slot, np.zeros(NUM_JOINTS, np.int32)]),
        info=info,
    ))


T_POSE_TOLERANCE_DEG = 10.0


def _to_t_pose(model: AvatarModel) -> AvatarModel:
    """The avatar with its arms turned out level (SMPL-X's rest pose), if the file's rest pose has them lower.

    The engine's body poses are rotations from a T-pose; on an A-posed rest mesh every gesture would carry the
    arms down by the A's angle. The turn is baked into the rest mesh, its joints and its face shapes.
    """
    joints = model.rest_joints().astype(np.float64)
    rotations = np.zeros((NUM_JOINTS, 3))
    turned = []
    for side, sign in (("left", 1.0), ("right", -1.0)):
        shoulder, elbow, wrist = (JOINT_INDEX[f"{side}_{j}"] for j in ("shoulder", "elbow", "wrist"))
        upper, fore = joints[elbow] - joints[shoulder], joints[wrist] - joints[elbow]
        if min(np.linalg.norm(upper), np.linalg.norm(fore)) < 1e-4:
            continue  # the arm is not mapped
        level = np.array([sign, 0.0, 0.0])
        upper_turn = _align(upper, level)
        if np.degrees(np.linalg.norm(upper_turn)) < T_POSE_TOLERANCE_DEG:
            continue
        rotations[shoulder] = upper_turn
        upper_matrix = batch_rodrigues(upper_turn[None])[0]
        whole = batch_rodrigues(_align(fore, level)[None])[0]
        rotations[elbow] = _rotvec(upper_matrix.T @ whole)
        turned.append(f"{side} {np.degrees(np.linalg.norm(upper_turn)):.0f}°")
    if not turned:
        return model
    skinning = Kinematics(model.parents, joints).skinning_matrices(rotations)
    per_vertex = (np.asarray(model.skin_weights, np.float64) @ skinning.reshape(NUM_JOINTS, 16)).reshape(-1, 4, 4)
    rest = np.einsum("vab,vb->va", per_vertex[:, :3, :3], model.v_template) + per_vertex[:, :3, 3]
    expr = np.einsum("vab,vbk->vak", per_vertex[:, :3, :3], model.expr_dirs)
    info = dict(model.info)
    info["notes"] = [*info.get("notes", []), f"its arms were lower than a T-pose: turned level at load ({', '.join(turned)})"]
    springs = None if model.spring_bones is None else model.spring_bones.moved(skinning)
    return dataclasses.replace(model, v_template=rest.astype(np.float32), expr_dirs=expr.astype(np.float32), info=info,
                               spring_bones=springs)


def _align(vector: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Axis-angle of the shortest rotation taking `vector`'s direction to `target`'s."""
    a, b = vector / np.linalg.norm(vector), target / np.linalg.norm(target)
    axis = np.cross(a, b)
    length = float(np.linalg.norm(axis))
    angle = float(np.arctan2(length, float(np.dot(a, b))))
    return np.zeros(3) if length < 1e-9 else axis / length * angle


def _rotvec(matrix: np.ndarray) -> np.ndarray:
    """Axis-angle of a rotation matrix (angles below 180°)."""
    angle = float(np.arccos(np.clip((np.trace(matrix) - 1) / 2, -1.0, 1.0)))
    if angle < 1e-9:
        return np.zeros(3)
    axis = np.array([matrix[2, 1] - matrix[1, 2], matrix[0, 2] - matrix[2, 0], matrix[1, 0] - matrix[0, 1]])
    return axis / (2 * np.sin(angle)) * angle


def _ride(scene: GltfScene, smplx_of_node: dict[int, int], node: int) -> int:
    """The SMPL-X joint a node moves with: its own humanoid bone's, else its nearest humanoid ancestor's (pelvis)."""
    at = node
    while at != -1:
        if at in smplx_of_node:
            return smplx_of_node[at]
        at = scene.parents[at]
    return 0


def _spring_region(scene: GltfScene, smplx_of_node: dict[int, int], root: int) -> int:
    """The cloth region a spring chain drives: 0 (hair) for a chain riding on the head, neck or jaw, else 1 (shirt)."""
    head = {JOINT_INDEX["head"], JOINT_INDEX["neck"], JOINT_INDEX["jaw"]}
    return 0 if _ride(scene, smplx_of_node, root) in head else 1


def _chain_points(scene: GltfScene, chain: SpringChain) -> np.ndarray:
    """(N, 3) rest positions of a spring chain's joints, and of its virtual end past the leaf (VRM 0.x)."""
    nodes = [joint.node for joint in chain.joints]
    points = scene.world[nodes, :3, 3]
    parent = scene.parents[nodes[0]]
    before = points[-2] if len(nodes) > 1 else scene.world[parent, :3, 3] if parent >= 0 else None
    if chain.end_length <= 0 or before is None or np.linalg.norm(points[-1] - before) < 1e-9:
        return points
    direction = (points[-1] - before) / np.linalg.norm(points[-1] - before)
    scale = float(np.linalg.norm(scene.world[nodes[-1], :3, 0]))
    return np.vstack([points, points[-1] + direction * chain.end_length * scale])


def _spring_rig(scene: GltfScene, vrm: VrmInfo, smplx_of_node: dict[int, int]) -> SpringRig | None:
    """The VRM spring chains (two points or more) and their colliders as a SpringRig, or None when there are none."""
    chains = [(chain, points) for chain in vrm.spring_chains if len(points := _chain_points(scene, chain)) >= 2]
    if not chains:
        return None
    length = max(len(points) for _, points in chains)
    scale = np.linalg.norm(scene.world[:, :3, 0], axis=1)  # a node's radii grow with its scale
    rest = np.zeros((len(chains), length, 3))
    per_bone = {key: np.zeros((len(chains), length)) for key in ("stiffness", "gravity_power", "drag", "hit_radius")}
    gravity = np.zeros((len(chains), length, 3))
    for c, (chain, points) in enumerate(chains):
        rest[c] = np.vstack([points, np.repeat(points[-1:], length - len(points), axis=0)])
        for k, joint in enumerate(chain.joints):
            per_bone["stiffness"][c, k], per_bone["gravity_power"][c, k] = joint.stiffness, joint.gravity_power
            per_bone["drag"][c, k] = min(max(joint.drag, 0.0), 1.0)
            per_bone["hit_radius"][c, k] = joint.hit_radius * scale[joint.node]
            gravity[c, k] = np.asarray(joint.gravity_dir) / max(np.linalg.norm(joint.gravity_dir), 1e-12)  # (0, 0, 0): none
    if vrm.version == "0.x":
        gravity[:, :, [0, 2]] *= -1.0  # the reader turned VRM 0.x's scene to face +Z; its world directions turn too
    colliders = vrm.colliders
    heads = np.array([scene.world[k.node] @ (*k.offset, 1.0) for k in colliders]).reshape(-1, 4)[:, :3]
    tails = np.array([scene.world[k.node] @ (*(k.tail or k.offset), 1.0) for k in colliders]).reshape(-1, 4)[:, :3]
    collides = np.zeros((len(chains), len(colliders)), bool)
    for c, (chain, _) in enumerate(chains):
        collides[c, list(chain.colliders)] = True
    return SpringRig(
        rest=rest, count=np.array([len(points) for _, points in chains]),
        ride=np.array([_ride(scene, smplx_of_node, chain.joints[0].node) for chain, _ in chains]),
        channel=np.array([_spring_region(scene, smplx_of_node, chain.joints[0].node) for chain, _ in chains]),
        gravity_dir=gravity, **per_bone, collider_head=heads, collider_tail=tails,
        collider_radius=np.array([k.radius * scale[k.node] for k in colliders]),
        collider_ride=np.array([_ride(scene, smplx_of_node, k.node) for k in colliders], int), collides=collides)


def _spring_weights(scene: GltfScene, vrm: VrmInfo, smplx_of_node: dict[int, int],
                    node_weights: list[tuple[np.ndarray, np.ndarray]], positions: np.ndarray) -> np.ndarray | None:
    """(V, 4) cloth weights from the VRM spring bone chains, or None when the avatar has none.

    A chain's cloth region (`_spring_region`) moves its vertices by the chain tip's lag (studio.avatar.springs) times
    how far down the chain they hang: 0 at the attached root, 1 at the tip, and in between by the vertex's place
    along the bone it is skinned to (a bone turning about its root moves its vertices in proportion to the distance).
    """
    bones: dict[int, tuple] = {}  # node -> (region, follow at the bone's root, at its end, root, end)
    for chain in vrm.spring_chains:
        points = _chain_points(scene, chain)
        if len(points) < 2:
            continue
        region = _spring_region(scene, smplx_of_node, chain.joints[0].node)
        last = len(points) - 1
        for depth, joint in enumerate(chain.joints):
            span = (depth / last, min(depth + 1, last) / last)
            if joint.node not in bones or span[1] > bones[joint.node][2]:
                bones[joint.node] = (region, *span, points[depth], points[min(depth + 1, last)])
    if not bones:
        return None
    out = np.zeros((len(positions), 4), np.float32)
    start = 0
    for nodes, weights in node_weights:
        rows = slice(start, start + len(nodes))
        start += len(nodes)
        for node in set(np.unique(nodes).tolist()) & set(bones):
            region, low, high, root, end = bones[node]
            place = _place_along(positions[rows], root, end)
            out[rows, region] += (weights * (nodes == node)).sum(axis=1) * (low + (high - low) * place)
    return out if out.any() else None


def _place_along(points: np.ndarray, root: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How far along the bone root→end each point lies, 0 at the root and 1 at the end (clamped); 1 for a bone of
    no length, so its vertices follow it fully."""
    direction = end - root
    length_sq = float(direction @ direction)
    if length_sq <= 1e-12:
        return np.ones(len(points))
    return np.clip((points - root) @ direction / length_sq, 0.0, 1.0)


def _spring_places(scene: GltfScene, vrm: VrmInfo, node_weights: list[tuple[np.ndarray, np.ndarray]],
                   positions: np.ndarray) -> np.ndarray | None:
    """(V, 3): per vertex the spring chain (the SpringRig's index) it is skinned to most, how far along that chain it
    hangs (in joints: 1.5 is halfway between its second and third joint, by its place along the bone it is skinned
    to), and the share of its skin weights on that chain's bones; None when no vertex hangs on a chain. The renderer
    moves each vertex by its own chain's joint displacements there, so chains swing apart."""
    bones: dict[int, tuple] = {}  # node -> (chain, depth at the bone's root, at its end, root, end)
    chains = [(chain, points) for chain in vrm.spring_chains if len(points := _chain_points(scene, chain)) >= 2]
    for c, (chain, points) in enumerate(chains):  # numbered as _spring_rig numbers them
        last = len(points) - 1
        for depth, joint in enumerate(chain.joints):
            end = min(depth + 1, last)
            if joint.node not in bones or end > bones[joint.node][2]:
                bones[joint.node] = (c, depth, end, points[depth], points[end])
    if not bones:
        return None
    out = np.zeros((len(positions), 3), np.float32)
    start = 0
    for nodes, weights in node_weights:
        rows = slice(start, start + len(nodes))
        start += len(nodes)
        share: dict[int, np.ndarray] = {}
        along: dict[int, np.ndarray] = {}
        for node in set(np.unique(nodes).tolist()) & set(bones):
            chain, low, high, root, end = bones[node]
            place = _place_along(positions[rows], root, end)
            on_node = (weights * (nodes == node)).sum(axis=1)
            share[chain] = share.get(chain, 0.0) + on_node
            along[chain] = along.get(chain, 0.0) + on_node * (low + (high - low) * place)
        for chain, weight in share.items():
            better = weight > out[rows, 2]
            place_rows = np.flatnonzero(better) + rows.start
            out[place_rows] = np.column_stack([np.full(len(place_rows), chain), along[chain][better] / weight[better],
                                               weight[better]])
    return out if out[:, 2].any() else None


def _joint_positions(scene: GltfScene, smplx_of_node: dict[int, int], positions: np.ndarray) -> np.ndarray:
    """(55, 3) rest joint positions: the mapped nodes', an unmapped joint at its parent's (the pelvis: mesh centre)."""
    joints = np.full((NUM_JOINTS, 3), np.nan)
    for node, joint in smplx_of_node.items():
        joints[joint] = scene.world[node][:3, 3]
    if np.isnan(joints[0]).any():
        low, high = positions.min(axis=0), positions.max(axis=0)
        joints[0] = ((low[0] + high[0]) / 2, low[1] + 0.5 * (high[1] - low[1]), (low[2] + high[2]) / 2)
    for joint in range(1, NUM_JOINTS):
        if np.isnan(joints[joint]).any():
            joints[joint] = joints[PARENTS[joint]]
    return joints


def _morph_table(scene: GltfScene, offsets: np.ndarray) -> dict[tuple[int, int], list[tuple[int, np.ndarray]]]:
    """(node, morph index) -> [(first vertex, displacement (N, 3))] over the node's primitives."""
    table: dict[tuple[int, int], list[tuple[int, np.ndarray]]] = {}
    for i, piece in enumerate(scene.primitives):
        for k, delta in enumerate(piece.targets):
            table.setdefault((piece.node, k), []).append((int(offsets[i]), delta))
    return table


Source = tuple[str, str, float]  # ("morph" or "expression", its name, weight)


def binds_anything(expression: Expression) -> bool:
    """Whether a VRM expression binds a morph, a colour or a texture: one that binds nothing (the VRM Add-on for
    Blender writes every preset, bound or not) drives nothing, so it is never offered as a source."""
    return bool(expression.binds or expression.colors or expression.transforms)


def automatic_mapping(scene: GltfScene, vrm: VrmInfo) -> tuple[dict[str, list[Source]], dict[str, list[Source]]]:
    """(ARKit shape -> sources found by name, ARKit shape -> VRM fallback sources), before any mapping file.
    Only expressions that bind something are sources (`binds_anything`)."""
    expressions = {name: x for name, x in vrm.expressions.items() if binds_anything(x)}
    by_name: dict[str, list[Source]] = {}
    for name in expressions:  # perfect sync: expressions named as ARKit shapes
        column = _arkit_column(name)
        if column is not None:
            by_name.setdefault(ARKIT_NAMES[column], [("expression", name, 1.0)])
    for piece in scene.primitives:
        for name in piece.target_names:
            column = _arkit_column(name)
            if column is None:
                continue
            sources = by_name.setdefault(ARKIT_NAMES[column], [])
            if not any(kind == "expression" for kind, _, _ in sources) and ("morph", name, 1.0) not in sources:
                sources.append(("morph", name, 1.0))  # every morph of that name (face, teeth, ...) moves
    fallback: dict[str, list[Source]] = {}
    for shape, sources in VOWEL_FALLBACK.items():
        if shape in by_name:
            continue
        for expression_name, weight in sources:
            if expression_name in expressions:
                fallback.setdefault(shape, []).append(("expression", expression_name, weight))
            elif expression_name.startswith("blink") and "blink" in expressions:
                fallback.setdefault(shape, []).append(("expression", "blink", weight * 0.5))  # one blink for both eyes
    return by_name, fallback


def _expressions(scene: GltfScene, vrm: VrmInfo, offsets: np.ndarray, count: int,
                 overrides: dict[str, list[Source]]) -> tuple[np.ndarray, dict]:
    table = _morph_table(scene, offsets)
    morphs_named: dict[str, list[tuple[int, int]]] = {}
    for piece in scene.primitives:
        for k, name in enumerate(piece.target_names):
            if (piece.node, k) not in morphs_named.get(name, []):
                morphs_named.setdefault(name, []).append((piece.node, k))
    expr = np.zeros((count, 3, NUM_ARKIT), np.float32)

    def add(column: int, node: int, morph: int, weight: float) -> bool:
        pieces = table.get((node, morph), [])
        for first, delta in pieces:
            expr[first:first + len(delta), :, column] += weight * delta
        return bool(pieces)

    def drive(column: int, sources: list[Source]) -> bool:
        moved = False
        for kind, name, weight in sources:
            if kind == "morph":
                moved |= any([add(column, node, k, weight) for node, k in morphs_named.get(name, [])])
            elif name in vrm.expressions:
                moved |= any([add(column, node, k, weight * w) for node, k, w in vrm.expressions[name].binds])
        return moved

    by_name, fallback = automatic_mapping(scene, vrm)
    found, fell_back = set(), []
    for shape in ARKIT_NAMES:
        column = ARKIT_INDEX[shape]
        if shape in overrides:
            if drive(column, overrides[shape]):
                found.add(column)
        elif shape in by_name and drive(column, by_name[shape]):
            found.add(column)
        elif shape in fallback and drive(column, fallback[shape]):
            fell_back.append(f"{shape}←{'+'.join(name for _, name, _ in fallback[shape])}")
    missing = [ARKIT_NAMES[k] for k in range(NUM_ARKIT) if k not in found]
    kind = ("arkit" if not missing else "arkit+vowels" if found and fell_back else "arkit (partial)" if found
            else "vowels" if fell_back else "none")
    expr, drive = _emotion_columns(vrm, table, expr, found)
    return expr, {"kind": kind, "missing": missing, "fallback": fell_back}, drive


def _emotion_columns(vrm: VrmInfo, table: dict, expr: np.ndarray,
                     found: set[int]) -> tuple[np.ndarray, ExpressionDrive | None]:
    """`expr` with one more column per VRM emotion expression that moves vertices, and the drive for those columns.

    An emotion whose source shapes (EMOTION_SOURCES) the avatar all has as ARKit shapes is left out: its own
    ARKit shapes already show it, and driving both would double it up.
    """
    columns, expressions = [], []
    for emotion in EMOTIONS:
        expression = vrm.expressions.get(emotion) or next(
            (x for name, x in vrm.expressions.items() if name.lower() == emotion), None)
        if expression is None or all(ARKIT_INDEX[shape] in found for shape in EMOTION_SOURCES[emotion]):
            continue
        column = np.zeros(expr.shape[:2], np.float32)
        for node, morph, weight in expression.binds:
            for first, delta in table.get((node, morph), []):
                column[first:first + len(delta)] += weight * delta
        if np.abs(column).max(initial=0.0) > 0:
            columns.append(column)
            expressions.append((emotion, expression))
    if not columns:
        return expr, None
    drive = ExpressionDrive(tuple(e for e, _ in expressions), tuple(x.is_binary for _, x in expressions),
                            tuple(dict(x.overrides) for _, x in expressions))
    return np.concatenate([expr, np.stack(columns, axis=2)], axis=2), drive


def _material_binds(scene: GltfScene, vrm: VrmInfo, count: int,
                    overrides: dict[str, list[Source]]) -> tuple[MaterialBinds | None, np.ndarray | None]:
    """The expressions' material binds and each vertex's row in their table (None: no expression binds a material).
    A non-emotion expression's weight is read from the ARKit shapes the mapping drives with it, else (the face has
    those ARKit shapes itself) from the ones the VRM fallback would drive with it."""
    materials = bound_materials(vrm.expressions)
    if not materials:
        return None, None
    by_name, fallback = automatic_mapping(scene, vrm)
    sources: dict[str, list[tuple[int, float]]] = {}
    for shape in ARKIT_NAMES:
        chosen = overrides.get(shape) or by_name.get(shape) or fallback.get(shape) or []
        for kind, name, weight in chosen:
            if kind == "expression":
                sources.setdefault(name, []).append((ARKIT_INDEX[shape], weight))
    vowels: dict[str, list[tuple[int, float]]] = {}  # the face's own ARKit shapes drive it: the vowel fallback's reading
    for shape, pairs in VOWEL_FALLBACK.items():
        for name, weight in pairs:
            vowels.setdefault(name, []).append((ARKIT_INDEX[shape], weight))
            if name.startswith("blink"):  # one blink expression for both eyes
                vowels.setdefault("blink", []).append((ARKIT_INDEX[shape], weight * 0.5))
    for name, pairs in vowels.items():
        if name in vrm.expressions and name not in sources:
            sources[name] = pairs
    slot_of = {material: k + 1 for k, material in enumerate(materials)}
    slots = np.zeros(count, np.int32)
    start = 0
    for piece in scene.primitives:
        slots[start:start + len(piece.positions)] = slot_of.get(piece.material, 0)
        start += len(piece.positions)
    initial = []
    for material in materials:
        transform = scene.materials[material].uv_transform
        initial.append((1.0, 1.0, 0.0, 0.0) if transform is None else
                       (float(transform[0, 0]), float(transform[1, 1]), float(transform[0, 2]), float(transform[1, 2])))
    return MaterialBinds(materials, dict(vrm.expressions), {k: tuple(v) for k, v in sources.items()}, tuple(initial)), slots


def _arkit_column(name: str) -> int | None:
    """ARKit index of a morph or expression name in any spelling (`JawOpen`, `jaw_open`, `blendShape1.jawOpen`)."""
    for candidate in (name, name.rsplit(".", 1)[-1], name.split("_", 1)[-1] if name.lower().startswith("arkit") else name):
        try:
            return arkit_index(candidate)
        except KeyError:
            continue
    return None


def _srgb(linear: np.ndarray) -> np.ndarray:
    """glTF factors are linear; the studio's vertex colours are display (sRGB, gamma 2.2) values."""
    return np.power(np.clip(linear, 0.0, 1.0), 1 / 2.2)


def _look(scene: GltfScene, count: int, bound: set[int]):
    """Per-vertex colour (sRGB), UVs, atlas cell, (alpha, cutoff), and the texture atlas. The `bound` materials'
    texture transforms (scale and offset) are left to the material bind table (`studio.avatar.material_binds`)."""
    cells, atlas = _atlas(scene)
    colors = np.ones((count, 3), np.float32)
    uvs = np.zeros((count, 2), np.float32)
    rects = np.zeros((count, 4), np.float32)
    rects[:] = cells[None]  # the white texel
    alpha = np.zeros((count, 2), np.float32)
    alpha[:] = (1.0, -1.0)
    shading = np.zeros((count, 6), np.float32)
    start = 0
    for piece in scene.primitives:
        rows = slice(start, start + len(piece.positions))
        start += len(piece.positions)
        base = np.ones(4, np.float32)
        if piece.material is not None:
            material = scene.materials[piece.material]
            base = np.asarray(material.base_color, np.float32)
            if material.texture_image in scene.images and piece.uvs is not None:
                rects[rows] = cells[material.texture_image]
                uvs[rows] = piece.uvs
                if material.uv_transform is not None and piece.material not in bound:
                    uvs[rows] = piece.uvs @ material.uv_transform[:2, :2].T + material.uv_transform[:2, 2]
            cutoff = material.alpha_cutoff if material.alpha_mode == "MASK" else 0.5 if material.alpha_mode == "BLEND" else -1.0
            alpha[rows] = (base[3], cutoff)
            if material.toon is not None:  # MToon where the file has it (unlit is its fallback for other renderers)
                shade, shift, toony = material.toon
                shading[rows] = (*shade, 1.0, shift, toony)
            elif material.unlit:
                shading[rows, 3] = 2.0
        tint = base[None, :3] * (piece.colors[:, :3] if piece.colors is not None else 1.0)
        colors[rows] = _srgb(tint)
    return colors, uvs, rects, alpha, atlas, (shading if shading[:, 3].any() else None)


def _atlas(scene: GltfScene) -> tuple[dict, np.ndarray]:
    """Pack the base colour textures side by side in one RGBA atlas (with a white texel for untextured parts).

    Cells are keyed by image index (and `None` for the white texel): (u0, v0, width, height) in atlas units.
    """
    from PIL import Image

    images = {}
    for index, pixels in scene.images.items():
        height, width = pixels.shape[:2]
        scale = min(1.0, _ATLAS_CELL / max(height, width))
        if scale < 1.0:
            size = (max(1, int(width * scale)), max(1, int(height * scale)))
            pixels = np.asarray(Image.fromarray(pixels).resize(size, Image.Resampling.LANCZOS))
        images[index] = pixels
    cell_width = 4 + max([p.shape[1] + 2 * _ATLAS_PAD for p in images.values()], default=0)
    cell_height = max([4] + [p.shape[0] + 2 * _ATLAS_PAD for p in images.values()])
    columns = max(1, int(np.ceil(np.sqrt(len(images) + 1))))
    rows = int(np.ceil((len(images) + 1) / columns))
    total_width, total_height = columns * cell_width, rows * cell_height
    atlas = np.zeros((total_height, total_width, 4), np.uint8)
    atlas[:4, :4] = 255  # cell 0 holds the white texel
    cells = {None: np.array([2 / total_width, 2 / total_height, 0.0, 0.0], np.float32)}
    for slot, (index, pixels) in enumerate(images.items(), start=1):
        height, width = pixels.shape[:2]
        x, y = (slot % columns) * cell_width, (slot // columns) * cell_height
        padded = np.pad(pixels, ((_ATLAS_PAD, _ATLAS_PAD), (_ATLAS_PAD, _ATLAS_PAD), (0, 0)), mode="wrap")
        atlas[y:y + height + 2 * _ATLAS_PAD, x:x + width + 2 * _ATLAS_PAD] = padded
        cells[index] = np.array([(x + _ATLAS_PAD) / total_width, (y + _ATLAS_PAD) / total_height,
                                 width / total_width, height / total_height], np.float32)
    return cells, atlas


def describe_import(model: AvatarModel) -> str:
    """One line for the user about an imported avatar: what it is, whose, and how the engine drives its face."""
    info = model.info
    if not info:
        return ""
    meta = info.get("meta") or {}
    who = f" by {meta['author']}" if meta.get("author") else ""
    licence = f" ({meta['licence']})" if meta.get("licence") else ""
    missing = info.get("arkit_missing") or []
    face = (f"face mapping: {info['mapping']}, {52 - len(missing)} of 52 ARKit shapes"
            + (f" (missing {', '.join(missing[:6])}{', …' if len(missing) > 6 else ''})" if missing else ""))
    if info.get("mapping_file"):
        face += f", mapping from {Path(str(info['mapping_file'])).name}"
    if info.get("emotions"):
        face += f"; emotions {', '.join(info['emotions'])} follow the face"
    if info.get("spring_chains"):
        chains, colliders = info["spring_chains"], info.get("spring_colliders", 0)
        face += f"; spring bones: {chains} chain{'s' * (chains != 1)}, {colliders} collider{'s' * (colliders != 1)}"
    notes = "; ".join(info.get("notes") or [])
    return f"{info.get('format', 'glTF')}{who}{licence}; {face}" + (f"; {notes}" if notes else "")


def is_gltf_path(path: str | os.PathLike) -> bool:
    return Path(path).suffix.lower() in (".glb", ".gltf", ".vrm")


__all__ = ["HUMANOID_TO_SMPLX", "VOWEL_FALLBACK", "automatic_humanoid", "automatic_mapping", "avatar_from_scene",
           "binds_anything", "current_mapping_text", "describe_import", "is_gltf_path", "load_gltf_avatar"]
