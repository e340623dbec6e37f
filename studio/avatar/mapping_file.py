"""The mapping of an imported avatar, saved beside it as `<name>.mapping.yaml` and edited by hand.

It says which of the avatar's morph targets or VRM expressions each ARKit channel drives (with a weight), and,
for plain glTF whose bone names the studio cannot guess, which node is which humanoid bone. Entries replace the
automatic mapping for their channel or bone; anything not named stays automatic.

    schema_version: 1
    arkit:
      jawOpen: Fcl_MTH_A                      # a morph target (or expression) by name, weight 1
      mouthSmileLeft: {expression: happy, weight: 0.5}
      cheekPuff: [{morph: Puff_L, weight: 0.5}, {morph: Puff_R, weight: 0.5}]
      tongueOut: none                         # drives nothing
    bones:
      head: J_Bip_C_Head                      # humanoid bone -> node name
      jaw: none                               # not driven, even where the studio would guess one

The mapping dialog (widgets.mapping_dialog) writes it with `write_mapping`: checked as the loader reads it, then
written through a temp file and a rename, so a bad entry or a failed write leaves the user's file as it was.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from studio.avatar.arkit import ARKIT_NAMES
from studio.avatar.gltf import GltfScene
from studio.avatar.model import AvatarFormatError
from studio.avatar.vrm import VrmInfo
from studio.fileio import atomic_write

SCHEMA_VERSION = 1
UNMAPPED = -1  # the node of a bone the file says is not driven (`bones: {jaw: none}`)
Source = tuple[str, str, float]


class MappingEntryError(AvatarFormatError):
    """A refused entry: `field` is where it is (`arkit.jawOpen`, `bones.head`), `problem` what is wrong with it."""

    def __init__(self, where: str, field: str, problem: str) -> None:
        super().__init__(f"{where}: {field}: {problem}")
        self.field, self.problem = field, problem


def mapping_path(avatar_path: str | Path) -> Path:
    """`alice.vrm` -> `alice.mapping.yaml` in the same folder."""
    avatar_path = Path(avatar_path)
    return avatar_path.with_name(avatar_path.stem + ".mapping.yaml")


def read_mapping(path: Path, scene: GltfScene, vrm: VrmInfo,
                 bone_names: tuple[str, ...]) -> tuple[dict[str, list[Source]], dict[str, int]]:
    """(ARKit shape -> sources, humanoid bone -> node or UNMAPPED) from a mapping file; AvatarFormatError names the field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        reason = " ".join(str(error).split())  # YAML's message spans lines
        raise AvatarFormatError(f"{path}: not a readable mapping file ({type(error).__name__}: {reason})"[:300]) from None
    return parse_mapping(data, str(path), scene, vrm, bone_names)


def parse_mapping(data, where: str, scene: GltfScene, vrm: VrmInfo,
                  bone_names: tuple[str, ...]) -> tuple[dict[str, list[Source]], dict[str, int]]:
    """`read_mapping` of already-parsed YAML; MappingEntryError says `where`, the field and the problem."""
    def fail(field: str, problem: str) -> MappingEntryError:
        return MappingEntryError(where, field, problem)

    if not isinstance(data, dict):
        raise fail("(top level)", "expected a mapping with schema_version, arkit and bones")
    if data.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise fail("schema_version", f"{data.get('schema_version')!r}; this studio reads {SCHEMA_VERSION}")
    unknown = set(data) - {"schema_version", "arkit", "bones"}
    if unknown:
        raise fail(", ".join(sorted(map(str, unknown))), "unknown key; allowed: schema_version, arkit, bones")
    morphs = {name for piece in scene.primitives for name in piece.target_names}
    arkit: dict[str, list[Source]] = {}
    for shape, entry in (data.get("arkit") or {}).items():
        if shape not in ARKIT_NAMES:
            raise fail(f"arkit.{shape}", "not an ARKit shape; allowed: the 52 ARKit names (eyeBlinkLeft, jawOpen, ...)")
        arkit[shape] = [_source(item, morphs, vrm, lambda problem, s=shape: fail(f"arkit.{s}", problem))
                        for item in _items(entry)]
    nodes = {name: index for index, name in enumerate(scene.node_names)}
    bones: dict[str, int] = {}
    for bone, node in (data.get("bones") or {}).items():
        if bone not in bone_names:
            raise fail(f"bones.{bone}", "not a humanoid bone; allowed: hips, spine, chest, neck, head, leftUpperArm, ...")
        if node is None or node == "none":
            bones[bone] = UNMAPPED
            continue
        if node not in nodes:
            raise fail(f"bones.{bone}", f"node {node!r} is not in the avatar")
        bones[bone] = nodes[node]
    return arkit, bones


def _items(entry) -> list:
    if entry is None or entry == "none":
        return []
    return entry if isinstance(entry, list) else [entry]


def _source(item, morphs: set[str], vrm: VrmInfo, fail) -> Source:
    if isinstance(item, str):
        item = {"morph": item} if item in morphs else {"expression": item}
    keys = set(item) if isinstance(item, dict) else set()
    if not isinstance(item, dict) or len(keys & {"morph", "expression"}) != 1 or keys - {"morph", "expression", "weight"}:
        raise fail(f"{item!r}: expected a name, or {{morph: NAME}} / {{expression: NAME}} with an optional weight")
    weight = item.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not -2.0 <= weight <= 2.0:
        raise fail(f"weight {weight!r}; expected a number from -2 to 2")
    if "morph" in item:
        if item["morph"] not in morphs:
            raise fail(f"morph target {item['morph']!r} is not in the avatar (it has {len(morphs)}: "
                       f"{', '.join(sorted(morphs)[:8])}{', …' if len(morphs) > 8 else ''})")
        return ("morph", str(item["morph"]), float(weight))
    if item["expression"] not in vrm.expressions:
        raise fail(f"{item['expression']!r} is neither a morph target nor an expression of the avatar "
                   f"(expressions: {', '.join(sorted(vrm.expressions)) or 'none'})")
    return ("expression", str(item["expression"]), float(weight))


def mapping_text(arkit: dict[str, list[Source]], bones: dict[str, str | None], every_shape: bool = True) -> str:
    """Mapping-file YAML: with `every_shape`, every ARKit channel (`none` where `arkit` has none), to edit by hand;
    else only the channels in `arkit`. A bone whose node is None is written `none` (not driven)."""
    lines = [f"schema_version: {SCHEMA_VERSION}", "arkit:" if arkit or every_shape else "arkit: {}"]
    for shape in ARKIT_NAMES:
        if shape not in arkit and not every_shape:
            continue
        sources = arkit.get(shape, [])
        if not sources:
            lines.append(f"  {shape}: none")
        else:
            items = ", ".join(f"{{{kind}: {json.dumps(name)}, weight: {weight:g}}}"  # JSON strings are YAML too
                              for kind, name, weight in sources)
            lines.append(f"  {shape}: [{items}]")
    lines.append("bones:" if bones else "bones: {}")
    lines += [f"  {bone}: {'none' if node is None else json.dumps(node)}" for bone, node in sorted(bones.items())]
    return "\n".join(lines) + "\n"


def write_mapping(avatar_path: str | os.PathLike, arkit: dict[str, list[Source]], bones: dict[str, str | None],
                  scene: GltfScene, vrm: VrmInfo, bone_names: tuple[str, ...], keep_previous_as: str | None = None) -> Path:
    """Write these entries (only these: every other channel and bone stays automatic) beside the avatar.

    They are checked as `read_mapping` will read them before anything is written (MappingEntryError names the
    field), and written through a temp file and a rename, so the file on disk is the old one or the new one.
    """
    target = mapping_path(avatar_path)
    text = ("# Written by Avatar Studio (Avatar > Edit Mapping). Channels and bones not named here are mapped\n"
            "# automatically.\n" + mapping_text(arkit, bones, every_shape=False))
    parse_mapping(yaml.safe_load(text), str(target), scene, vrm, bone_names)
    return atomic_write(target, text, keep_previous_as=keep_previous_as)
