"""VRM 0.x (`VRM`) and VRM 1.0 (`VRMC_vrm`) extensions: humanoid bones, expressions, look-at and meta.

Both versions are read into one shape: VRM 1.0 names (bones `hips`, `leftUpperArm`, ...; expressions `aa`, `blink`,
`happy`, ...), expression binds as (node, morph target, weight 0..1), and material binds (a material's colour or its
texture's scale/offset at full weight; VRM 0.x `materialValues` turned into 1.0 terms as three-vrm does).
`resolve_expressions` applies `isBinary` and the override rules (`overrideBlink` / `overrideLookAt` / `overrideMouth`:
block or blend) as the VRM 1.0 spec says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from studio.avatar.gltf import GltfScene
from studio.avatar.model import AvatarFormatError

OVERRIDE_GROUPS = {
    "overrideBlink": ("blink", "blinkLeft", "blinkRight"),
    "overrideLookAt": ("lookUp", "lookDown", "lookLeft", "lookRight"),
    "overrideMouth": ("aa", "ih", "ou", "ee", "oh"),
}
_VRM0_PRESETS = {
    "a": "aa", "i": "ih", "u": "ou", "e": "ee", "o": "oh", "blink": "blink", "blink_l": "blinkLeft",
    "blink_r": "blinkRight", "joy": "happy", "angry": "angry", "sorrow": "sad", "fun": "relaxed", "surprised": "surprised",
    "lookup": "lookUp", "lookdown": "lookDown", "lookleft": "lookLeft", "lookright": "lookRight", "neutral": "neutral",
}
VRM0_END_M = 0.07  # UniVRM 0.x gives each leaf of a spring bone group a tail 7 cm on, so the leaf swings too
_VRM0_BONES = {"leftThumbProximal": "leftThumbMetacarpal", "leftThumbIntermediate": "leftThumbProximal",
               "rightThumbProximal": "rightThumbMetacarpal", "rightThumbIntermediate": "rightThumbProximal"}


@dataclass(frozen=True)
class Expression:
    name: str  # VRM 1.0 preset name, or the custom name
    binds: tuple[tuple[int, int, float], ...]  # (node, morph target index, weight 0..1)
    is_binary: bool = False
    overrides: Mapping[str, str] = field(default_factory=dict)  # overrideBlink/LookAt/Mouth -> none|block|blend
    # (material, colour type as VRM 1.0 names it: color, shadeColor, rimColor, ..., target RGBA linear at full weight)
    colors: tuple[tuple[int, str, tuple[float, float, float, float]], ...] = ()
    # (material, texture scale (x, y), offset (x, y) at full weight; at weight 0 the material's own texture transform)
    transforms: tuple[tuple[int, tuple[float, float], tuple[float, float]], ...] = ()


@dataclass(frozen=True)
class SpringJoint:
    """One joint of a spring chain with the VRM parameters of the bone from it to the next joint."""

    node: int
    stiffness: float = 1.0
    gravity_power: float = 0.0
    gravity_dir: tuple[float, float, float] = (0.0, -1.0, 0.0)  # world (glTF axes)
    drag: float = 0.5
    hit_radius: float = 0.0  # metres, in the node's scale


@dataclass(frozen=True)
class SpringCollider:
    """A sphere (tail None) or capsule collider riding on a node; offset and tail in the node's own space."""

    node: int
    offset: tuple[float, float, float]
    radius: float
    tail: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class SpringChain:
    joints: tuple[SpringJoint, ...]  # root first
    colliders: tuple[int, ...] = ()  # indices into VrmInfo.colliders
    end_length: float = 0.0  # VRM 0.x: a virtual last joint this far (metres, node scale) past the leaf, as UniVRM adds


@dataclass(frozen=True)
class VrmInfo:
    version: str  # "0.x", "1.0" or "" (plain glTF)
    humanoid: Mapping[str, int]  # VRM 1.0 bone name -> node
    expressions: Mapping[str, Expression]
    look_at: str  # "bone", "expression" or ""
    meta: Mapping[str, str]
    springs: tuple[tuple[int, ...], ...] = ()  # spring bone chains, root first (node indices)
    spring_chains: tuple[SpringChain, ...] = ()  # the same chains with their parameters and colliders
    colliders: tuple[SpringCollider, ...] = ()


def read_vrm(scene: GltfScene) -> VrmInfo:
    """The VRM extension of a scene (an empty VrmInfo for plain glTF); AvatarFormatError names a bad field."""
    try:
        if "VRMC_vrm" in scene.extensions:
            return _vrm1(scene, scene.extensions["VRMC_vrm"])
        if "VRM" in scene.extensions:
            return _vrm0(scene, scene.extensions["VRM"])
    except AvatarFormatError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise AvatarFormatError(f"{scene.path}: its VRM extension is malformed ({type(error).__name__}: {error})") from None
    return VrmInfo("", {}, {}, "", {})


def _node(scene: GltfScene, value, what: str) -> int:
    if not isinstance(value, int) or not 0 <= value < len(scene.node_names):
        raise AvatarFormatError(f"{scene.path}: {what} refers to node {value!r}; the file has {len(scene.node_names)}")
    return value


def _vrm1(scene: GltfScene, ext: dict) -> VrmInfo:
    bones = {name: _node(scene, spec.get("node"), f"humanoid bone {name!r}")
             for name, spec in (ext.get("humanoid", {}).get("humanBones") or {}).items()}
    expressions = {}
    for group in ("preset", "custom"):
        for name, spec in (ext.get("expressions", {}).get(group) or {}).items():
            binds = tuple((_node(scene, b.get("node"), f"expression {name!r}"), int(b.get("index", -1)),
                           float(b.get("weight", 1.0))) for b in spec.get("morphTargetBinds") or [])
            overrides = {key: str(spec.get(key, "none")) for key in OVERRIDE_GROUPS}
            colors = tuple((_material(scene, b.get("material"), name), str(b.get("type", "color")),
                            _color(b.get("targetValue"), f"expression {name!r} materialColorBinds"))
                           for b in spec.get("materialColorBinds") or [])
            transforms = tuple((_material(scene, b.get("material"), name), _pair(b.get("scale"), (1.0, 1.0)),
                                _pair(b.get("offset"), (0.0, 0.0))) for b in spec.get("textureTransformBinds") or [])
            expressions[name] = Expression(name, binds, bool(spec.get("isBinary", False)), overrides, colors, transforms)
    meta = ext.get("meta") or {}
    chains, colliders = _springs1(scene, scene.extensions.get("VRMC_springBone") or {})
    return VrmInfo("1.0", bones, expressions, str((ext.get("lookAt") or {}).get("type", "")),
                   springs=tuple(tuple(j.node for j in chain.joints) for chain in chains), spring_chains=chains,
                   colliders=colliders, meta={
        "title": str(meta.get("name", "")),
        "author": ", ".join(str(a) for a in meta.get("authors") or []),
        "licence": str(meta.get("licenseUrl", "")),
        "redistribution": "allowed" if meta.get("allowRedistribution") else "not allowed",
    })


def _vrm0(scene: GltfScene, ext: dict) -> VrmInfo:
    bones = {}
    for spec in (ext.get("humanoid") or {}).get("humanBones") or []:
        name = str(spec.get("bone", ""))
        bones[_VRM0_BONES.get(name, name)] = _node(scene, spec.get("node"), f"humanoid bone {name!r}")
    expressions = {}
    for spec in (ext.get("blendShapeMaster") or {}).get("blendShapeGroups") or []:
        preset = str(spec.get("presetName", "unknown")).lower()
        name = _VRM0_PRESETS.get(preset) or str(spec.get("name", preset))
        binds = []
        for bind in spec.get("binds") or []:
            mesh = bind.get("mesh")
            for node in scene.mesh_nodes.get(mesh, []):
                binds.append((node, int(bind.get("index", -1)), float(bind.get("weight", 100.0)) / 100.0))
        colors, transforms = _material_values0(scene, spec.get("materialValues") or [], name)
        expressions[name] = Expression(name, tuple(binds), bool(spec.get("isBinary", False)), {}, colors, transforms)
    meta = ext.get("meta") or {}
    look = str((ext.get("firstPerson") or {}).get("lookAtTypeName", "")).lower()
    chains, colliders = _springs0(scene, ext.get("secondaryAnimation") or {})
    return VrmInfo("0.x", bones, expressions, "expression" if look == "blendshape" else look,
                   springs=tuple(tuple(j.node for j in chain.joints) for chain in chains), spring_chains=chains,
                   colliders=colliders, meta={
        "title": str(meta.get("title", "")),
        "author": str(meta.get("author", "")),
        "licence": str(meta.get("licenseName", "")),
        "redistribution": str(meta.get("otherPermissionUrl", "")),
    })


def _material(scene: GltfScene, value, expression: str) -> int:
    if not isinstance(value, int) or not 0 <= value < len(scene.materials):
        raise AvatarFormatError(f"{scene.path}: expression {expression!r} binds material {value!r}; "
                                f"the file has {len(scene.materials)}")
    return value


def _color(value, what: str) -> tuple[float, float, float, float]:
    items = [float(v) for v in value or ()]
    if len(items) not in (3, 4):
        raise ValueError(f"{what} targetValue is {value!r}; expected 3 or 4 numbers")
    return (*items[:3], items[3] if len(items) == 4 else 1.0)


def _pair(value, default: tuple[float, float]) -> tuple[float, float]:
    if value is None:
        return default
    items = [float(v) for v in value]
    if len(items) != 2:
        raise ValueError(f"a textureTransformBind scale/offset is {value!r}; expected 2 numbers")
    return items[0], items[1]


_VRM0_COLORS = {"_Color": "color", "_ShadeColor": "shadeColor", "_EmissionColor": "emissionColor",
                "_RimColor": "rimColor", "_OutlineColor": "outlineColor"}


def _material_values0(scene: GltfScene, values: list, expression: str):
    """VRM 0.x `materialValues` (by material name, Unity property) as 1.0 colour and texture transform binds: colours
    are Unity gamma-space values (made linear), `_MainTex_ST` is (scale x, y, offset x, y) with v upwards."""
    colors, transforms = [], []
    for value in values:
        names = [i for i, material in enumerate(scene.materials) if material.name == value.get("materialName")]
        target = [float(v) for v in value.get("targetValue") or ()]
        prop = str(value.get("propertyName", ""))
        if prop == "_MainTex_ST" and len(target) == 4:
            scale = (target[0], target[1])
            transforms += [(i, scale, (target[2], 1.0 - target[3] - target[1])) for i in names]
        elif prop in _VRM0_COLORS:
            rgba = _color(target, f"expression {expression!r} materialValues {prop}")
            linear = (*(max(c, 0.0) ** 2.2 for c in rgba[:3]), rgba[3])
            colors += [(i, _VRM0_COLORS[prop], linear) for i in names]
    return tuple(colors), tuple(transforms)


def _vector(value, what: str, default=(0.0, 0.0, 0.0)) -> tuple[float, float, float]:
    """A 3-vector from a list [x, y, z] or VRM 0.x's {"x": .., "y": .., "z": ..}."""
    if value is None:
        return default
    items = [value.get(axis, 0.0) for axis in "xyz"] if isinstance(value, dict) else list(value)
    if len(items) != 3:
        raise ValueError(f"{what} is {value!r}; expected 3 numbers")
    return tuple(float(v) for v in items)


def _collider_groups(scene: GltfScene, groups: list, used: list, what: str) -> tuple[int, ...]:
    """Collider indices of the groups a chain names (each group a list of collider indices)."""
    out = []
    for group in used or []:
        if not isinstance(group, int) or not 0 <= group < len(groups):
            raise AvatarFormatError(f"{scene.path}: {what} names collider group {group!r}; the file has {len(groups)}")
        out.extend(i for i in groups[group] if i not in out)
    return tuple(out)


def _springs1(scene: GltfScene, ext: dict) -> tuple[tuple[SpringChain, ...], tuple[SpringCollider, ...]]:
    """VRM 1.0 `VRMC_springBone`: springs of joints with their own parameters, sphere and capsule colliders."""
    colliders = []
    for spec in ext.get("colliders") or []:
        node = _node(scene, spec.get("node"), "a spring bone collider")
        shape = spec.get("shape") or {}
        kind = "capsule" if "capsule" in shape else "sphere"
        body = shape.get(kind) or {}
        colliders.append(SpringCollider(node, _vector(body.get("offset"), "a collider offset"),
                                        float(body.get("radius", 0.0)),
                                        _vector(body.get("tail"), "a collider tail") if kind == "capsule" else None))
    groups = []
    for group in ext.get("colliderGroups") or []:
        members = [int(i) for i in group.get("colliders") or []]
        bad = [i for i in members if not 0 <= i < len(colliders)]
        if bad:
            raise AvatarFormatError(f"{scene.path}: a spring bone collider group names collider {bad[0]}; "
                                    f"the file has {len(colliders)}")
        groups.append(members)
    chains = []
    for spring in ext.get("springs") or []:
        joints = tuple(SpringJoint(
            _node(scene, joint.get("node"), "a spring bone joint"), float(joint.get("stiffness", 1.0)),
            float(joint.get("gravityPower", 0.0)), _vector(joint.get("gravityDir"), "a gravityDir", (0.0, -1.0, 0.0)),
            float(joint.get("dragForce", 0.5)), float(joint.get("hitRadius", 0.0))) for joint in spring.get("joints") or [])
        chains.append(SpringChain(joints, _collider_groups(scene, groups, spring.get("colliderGroups"), "a spring")))
    return tuple(chains), tuple(colliders)


def _springs0(scene: GltfScene, ext: dict) -> tuple[tuple[SpringChain, ...], tuple[SpringCollider, ...]]:
    """VRM 0.x `secondaryAnimation`: bone groups (one parameter set, every path from a listed bone to a leaf is a
    chain) and collider groups of spheres. Their vectors are in Unity's axes: z is turned to glTF's."""
    colliders, groups = [], []
    for group in ext.get("colliderGroups") or []:
        node = _node(scene, group.get("node"), "a secondaryAnimation collider group")
        members = []
        for spec in group.get("colliders") or []:
            x, y, z = _vector(spec.get("offset"), "a collider offset")
            members.append(len(colliders))
            colliders.append(SpringCollider(node, (x, y, -z), float(spec.get("radius", 0.0))))
        groups.append(members)
    chains = []
    for group in ext.get("boneGroups") or []:
        x, y, z = _vector(group.get("gravityDir"), "a gravityDir", (0.0, -1.0, 0.0))
        settings = {"stiffness": float(group.get("stiffiness", 1.0)), "gravity_power": float(group.get("gravityPower", 0.0)),
                    "gravity_dir": (x, y, -z), "drag": float(group.get("dragForce", 0.4)),
                    "hit_radius": float(group.get("hitRadius", 0.02))}
        members = _collider_groups(scene, groups, group.get("colliderGroups"), "a secondaryAnimation bone group")
        for root in group.get("bones") or []:
            for nodes in _chains(scene, _node(scene, root, "a secondaryAnimation bone")):
                chains.append(SpringChain(tuple(SpringJoint(node, **settings) for node in nodes), members, VRM0_END_M))
    return tuple(chains), tuple(colliders)


def _chains(scene: GltfScene, root: int) -> list[tuple[int, ...]]:
    """VRM 0.x springs: every path from a listed bone down to a leaf of its subtree is one chain."""
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(scene.parents):
        children.setdefault(parent, []).append(node)
    chains, stack = [], [(root,)]
    while stack:
        path = stack.pop()
        below = children.get(path[-1], [])
        if not below or len(path) > 64:
            chains.append(path)
        stack.extend(path + (child,) for child in below)
    return chains


def resolve_expressions(info: VrmInfo, weights: Mapping[str, float]) -> dict[str, float]:
    """Expression weights after `isBinary` (> 0.5 is 1, else 0) and the overrides of the VRM 1.0 spec.

    An expression with `overrideBlink: block` and a weight above 0 sets the blinks to 0; `blend` scales them by
    (1 - its weight). Likewise look-at and mouth. Several overriding expressions take the strongest effect. A binary
    expression that any override reaches is suppressed completely (the spec's "interaction between override and
    isBinary").
    """
    return resolve_weights(info.expressions, weights)


def resolve_weights(expressions: Mapping[str, Expression], weights: Mapping[str, float]) -> dict[str, float]:
    """`resolve_expressions` for a name -> Expression table."""
    out = {}
    for name, value in weights.items():
        expression = expressions.get(name)
        value = min(max(float(value), 0.0), 1.0)
        out[name] = (1.0 if value > 0.5 else 0.0) if expression is not None and expression.is_binary else value
    for key, group in OVERRIDE_GROUPS.items():
        multiplier = 1.0
        for name, value in out.items():
            expression = expressions.get(name)
            if expression is None or value <= 0.0 or name in group:
                continue
            rule = expression.overrides.get(key, "none")
            if rule == "block":
                multiplier = 0.0
            elif rule == "blend":
                multiplier = min(multiplier, 1.0 - value)
        for name in group:
            if name in out:
                binary = expressions.get(name) is not None and expressions[name].is_binary
                out[name] *= 0.0 if binary and multiplier < 1.0 else multiplier
    return out


# Name-based guess of humanoid bones for plain glTF (Blender, Mixamo, VRoid-style names).
_BONE_WORDS = {
    "hips": ("hips", "hip", "pelvis"), "spine": ("spine", "spine0", "spine01"),
    "chest": ("chest", "spine1", "spine02", "spine001"), "upperChest": ("upperchest", "spine2", "spine03", "spine002"),
    "neck": ("neck",), "head": ("head",), "jaw": ("jaw",), "leftEye": ("eyeleft", "lefteye"),
    "rightEye": ("eyeright", "righteye"),
}
_SIDED_WORDS = {
    "UpperLeg": ("upperleg", "upleg", "thigh"), "LowerLeg": ("lowerleg", "leg", "shin", "calf", "knee"),
    "Foot": ("foot", "ankle"), "Toes": ("toes", "toe", "toebase"), "Shoulder": ("shoulder", "clavicle", "collar"),
    "UpperArm": ("upperarm", "arm"), "LowerArm": ("lowerarm", "forearm", "elbow"), "Hand": ("hand", "wrist"),
    "Eye": ("eye",),
    **{f"{finger}{segment}": (f"{finger}{segment}".lower(),) for finger, segments in (
        ("Thumb", ("Metacarpal", "Proximal", "Distal")), ("Index", ("Proximal", "Intermediate", "Distal")),
        ("Middle", ("Proximal", "Intermediate", "Distal")), ("Ring", ("Proximal", "Intermediate", "Distal")),
        ("Little", ("Proximal", "Intermediate", "Distal"))) for segment in segments},
}


def _bone_key(name: str) -> tuple[str, str]:
    """(side 'left'/'right'/'', normalised word) of a node name such as 'mixamorig:LeftArm', 'upper_arm.L'."""
    text = name.split(":")[-1]
    side = ""
    vroid = re.match(r"J_(?:Bip|Adj|Sec)_([CLR])_", text)  # VRoid: J_Bip_L_UpperArm
    if vroid:
        side = {"L": "left", "R": "right"}.get(vroid.group(1), "")
        text = text[vroid.end():]
    text = re.sub(r"^(Bip0?1_?|DEF-|ORG-)", "", text)
    match = None if side else re.search(r"(?:[_.\- ]([LRlr])|(Left|Right|left|right|_L|_R))$", text)
    if match:
        letter = (match.group(1) or match.group(2)).strip("_")[0].lower()
        side = "left" if letter == "l" else "right"
        text = text[:match.start()]
    match = re.match(r"(Left|Right|left|right|L_|R_|l_|r_)", text)
    if not side and match:
        side = "left" if match.group(1)[0].lower() == "l" else "right"
        text = text[match.end():]
    return side, re.sub(r"[^a-z0-9]", "", text.lower())


def guess_humanoid(scene: GltfScene, joint_nodes: set[int]) -> dict[str, int]:
    """VRM bone name -> node, guessed from the names of the skins' joints (first match in node order)."""
    found: dict[str, int] = {}
    for node in sorted(joint_nodes):
        side, word = _bone_key(scene.node_names[node])
        if side:
            for bone, words in _SIDED_WORDS.items():
                if word in words:
                    found.setdefault(side + bone, node)
        else:
            for bone, words in _BONE_WORDS.items():
                if word in words:
                    found.setdefault(bone, node)
    return found
