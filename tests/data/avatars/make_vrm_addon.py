"""Build tests/data/avatars/addon_vrm1.vrm and addon_vrm0.vrm: the Blender humanoid written by the VRM Add-on for Blender.

    VRM_ADDON_SRC=/path/to/VRM-Addon-for-Blender/src \\
        blender -b --factory-startup --python tests/data/avatars/make_vrm_addon.py

(Run by hand, not by the tests. Blender's Python also needs Debian's `python3-numpy`. VRM_ADDON_OUT_DIR changes where
the two files go.)

The humanoid (mesh, armature, ARKit shape keys, skin texture) comes from make_humanoid_glb.py beside this script; its mesh
is split by material into Skin, Cloth, Eye, Mouth and Hair objects, as character models come in several meshes. Everything
VRM is set through the add-on's own property groups and operators, and the add-on's exporter writes the files: the humanoid
bone map, expressions / blend shape groups bound to the ARKit shape keys on several meshes, MToon materials (the skin
textured with a shade colour and rim, the cloth with an outline), the ponytail as a spring bone chain with a sphere
collider on the head, and meta (title, author, licence).
"""

import os
import sys

import addon_utils
import bpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ["VRM_ADDON_SRC"])

import io_scene_vrm  # noqa: E402  (the add-on, from VRM_ADDON_SRC)
from io_scene_vrm.editor.vrm0.property_group import Vrm0HumanoidPropertyGroup  # noqa: E402
from make_humanoid_glb import HEAD, build_humanoid  # noqa: E402
from mathutils import Matrix  # noqa: E402

OUT_DIR = os.environ.get("VRM_ADDON_OUT_DIR") or os.path.dirname(os.path.abspath(__file__))
HUMAN_BONES = {  # VRM 1.0 human bone: our bone
    "hips": "hips", "spine": "spine", "chest": "chest", "neck": "neck", "head": "head",
    "leftUpperArm": "upper_arm.L", "leftLowerArm": "forearm.L", "leftHand": "hand.L",
    "rightUpperArm": "upper_arm.R", "rightLowerArm": "forearm.R", "rightHand": "hand.R",
    "leftUpperLeg": "thigh.L", "leftLowerLeg": "shin.L", "leftFoot": "foot.L",
    "rightUpperLeg": "thigh.R", "rightLowerLeg": "shin.R", "rightFoot": "foot.R",
}
EXPRESSIONS = {  # VRM 1.0 preset: ((shape key, weight), ...), bound on every mesh that has the shape key
    "aa": (("jawOpen", 1.0),),
    "ih": (("jawOpen", 0.3), ("mouthSmileLeft", 0.6), ("mouthSmileRight", 0.6)),
    "ou": (("mouthFunnel", 1.0),),
    "ee": (("jawOpen", 0.2), ("mouthSmileLeft", 1.0), ("mouthSmileRight", 1.0)),
    "oh": (("jawOpen", 0.6), ("mouthFunnel", 0.7)),
    "blink": (("eyeBlinkLeft", 1.0), ("eyeBlinkRight", 1.0)),
    "blinkLeft": (("eyeBlinkLeft", 1.0),),
    "blinkRight": (("eyeBlinkRight", 1.0),),
    "happy": (("mouthSmileLeft", 1.0), ("mouthSmileRight", 1.0), ("eyeBlinkLeft", 0.4), ("eyeBlinkRight", 0.4)),
}
VRM0_PRESETS = {"aa": ("A", "a"), "ih": ("I", "i"), "ou": ("U", "u"), "ee": ("E", "e"), "oh": ("O", "o"),
                "blink": ("Blink", "blink"), "blinkLeft": ("Blink_L", "blink_l"), "blinkRight": ("Blink_R", "blink_r"),
                "happy": ("Joy", "joy")}
META = {"title": "Addon Humanoid", "author": "Avatar Studio tests", "version": "1"}


def vrm_ready_humanoid():
    """The humanoid split by material into meshes, with MToon materials, in a fresh scene with the add-on registered."""
    body, rig = build_humanoid()
    if addon_utils.enable("io_scene_vrm", default_set=True) is None:  # after build: factory settings turn add-ons off
        raise RuntimeError(f"the VRM add-on did not load from {os.environ['VRM_ADDON_SRC']}")
    bpy.ops.object.select_all(action="DESELECT")
    body.select_set(True)
    bpy.context.view_layer.objects.active = body
    bpy.ops.object.mode_set(mode="EDIT")
    bpy.ops.mesh.select_all(action="SELECT")
    bpy.ops.mesh.separate(type="MATERIAL")
    bpy.ops.object.mode_set(mode="OBJECT")
    meshes = [obj for obj in bpy.data.objects if obj.type == "MESH"]
    for obj in meshes:
        obj.name = obj.data.name = obj.material_slots[0].material.name
        unused = [key for key in obj.data.shape_keys.key_blocks[1:] if not moves(obj, key)]
        for key in unused:  # as exporters keep only the morphs that move a mesh's vertices
            obj.shape_key_remove(key)
        if len(obj.data.shape_keys.key_blocks) == 1:
            obj.shape_key_clear()
    for material in bpy.data.materials:
        material.vrm_addon_extension.mtoon1.enabled = True  # the add-on turns the Principled BSDF into its MToon nodes
    mtoon = {name: bpy.data.materials[name].vrm_addon_extension.mtoon1 for name in ("Skin", "Cloth", "Hair")}
    skin = mtoon["Skin"].extensions.vrmc_materials_mtoon
    skin.shade_color_factor = (0.75, 0.45, 0.45)
    skin.shading_shift_factor = -0.1
    skin.shading_toony_factor = 0.85
    skin.parametric_rim_color_factor = (0.3, 0.2, 0.1)
    skin.parametric_rim_fresnel_power_factor = 4.0
    skin.parametric_rim_lift_factor = 0.1
    skin.rim_lighting_mix_factor = 0.5
    cloth = mtoon["Cloth"].extensions.vrmc_materials_mtoon
    cloth.shade_color_factor = (0.05, 0.08, 0.3)
    cloth.outline_width_mode = "worldCoordinates"
    cloth.outline_width_factor = 0.004
    cloth.outline_color_factor = (0.02, 0.02, 0.05)
    mtoon["Hair"].extensions.vrmc_materials_mtoon.shade_color_factor = (0.2, 0.08, 0.02)
    if mtoon["Skin"].pbr_metallic_roughness.base_color_texture.index.source is None:
        raise RuntimeError("the add-on's MToon conversion lost the skin texture")
    return meshes, rig


def moves(obj, key):
    basis = obj.data.shape_keys.key_blocks[0].data
    return any((a.co - b.co).length > 1e-6 for a, b in zip(key.data, basis))


def binds(meshes, expression):
    for shape, weight in EXPRESSIONS[expression]:
        for obj in meshes:
            if obj.data.shape_keys and shape in obj.data.shape_keys.key_blocks:
                yield obj, shape, weight


def write_vrm1(meshes, rig, path):
    extension = rig.data.vrm_addon_extension
    extension.spec_version = "1.0"
    vrm1 = extension.vrm1
    vrm1.humanoid.human_bones.initial_automatic_bone_assignment = False  # our map, not the add-on's guess
    for human_bone, bone in HUMAN_BONES.items():
        attribute = "".join("_" + c.lower() if c.isupper() else c for c in human_bone)
        getattr(vrm1.humanoid.human_bones, attribute).node.bone_name = bone
    meta = vrm1.meta
    meta.vrm_name = META["title"]
    meta.version = META["version"]
    meta.authors.add().value = META["author"]
    meta.avatar_permission = "everyone"
    meta.commercial_usage = "corporation"
    meta.credit_notation = "unnecessary"
    meta.allow_redistribution = True
    meta.modification = "allowModificationRedistribution"
    for name in EXPRESSIONS:
        attribute = "".join("_" + c.lower() if c.isupper() else c for c in name)
        expression = getattr(vrm1.expressions.preset, attribute)
        for obj, shape, weight in binds(meshes, name):
            bind = expression.morph_target_binds.add()
            bind.node.mesh_object_name = obj.name
            bind.index = shape
            bind.weight = weight
    happy = vrm1.expressions.preset.happy
    happy.override_blink = "blend"
    happy.override_mouth = "block"
    vrm1.expressions.preset.blink.is_binary = True

    spring_bone = extension.spring_bone1
    collider = spring_bone.add_collider(bpy.context, rig)
    collider.node.bone_name = "head"
    collider.shape_type = "Sphere"
    collider.shape.sphere.offset = (0.0, 0.12, 0.0)  # bone space: along the head bone, up from the neck
    collider.shape.sphere.radius = 0.12
    group = spring_bone.add_collider_group()
    group.vrm_name = "Head"
    group.add_collider().collider_uuid = collider.uuid
    spring = spring_bone.add_spring()
    spring.vrm_name = "Ponytail"
    for bone in ("hair_1", "hair_2"):
        joint = spring.add_joint()
        joint.node.bone_name = bone
        joint.stiffness = 0.8
        joint.gravity_power = 0.3
        joint.drag_force = 0.4
        joint.hit_radius = 0.02
    spring.add_collider_group().collider_group_uuid = group.uuid
    export(rig, path)


def write_vrm0(meshes, rig, path):
    extension = rig.data.vrm_addon_extension
    extension.spec_version = "0.0"
    vrm0 = extension.vrm0
    vrm0.humanoid.initial_automatic_bone_assignment = False  # our map, not the add-on's guess
    Vrm0HumanoidPropertyGroup.fixup_human_bones(rig)  # one entry per VRM 0.x human bone
    for entry in vrm0.humanoid.human_bones:
        if entry.bone in HUMAN_BONES:
            entry.node.bone_name = HUMAN_BONES[entry.bone]
    meta = vrm0.meta
    meta.title = META["title"]
    meta.version = META["version"]
    meta.author = META["author"]
    meta.allowed_user_name = "Everyone"
    meta.commercial_ussage_name = "Allow"
    meta.license_name = "CC0"
    for name, (group_name, preset) in VRM0_PRESETS.items():
        group = vrm0.blend_shape_master.blend_shape_groups.add()
        group.name = group_name
        group.preset_name = preset
        group.is_binary = name.startswith("blink")
        for obj, shape, weight in binds(meshes, name):
            bind = group.binds.add()
            bind.mesh.mesh_object_name = obj.name
            bind.index = shape
            bind.weight = weight
    secondary = vrm0.secondary_animation
    bpy.ops.vrm.add_vrm0_secondary_animation_collider_group(armature_object_name=rig.name)
    colliders = secondary.collider_groups[0]
    colliders.node.bone_name = "head"
    bpy.ops.vrm.add_vrm0_secondary_animation_collider_group_collider(armature_object_name=rig.name, collider_group_index=0,
                                                                     bone_name="head")
    sphere = colliders.colliders[0].bpy_object
    bpy.context.view_layer.update()
    sphere.matrix_world = Matrix.Translation(HEAD)  # the head's centre
    sphere.empty_display_size = 0.12
    bpy.ops.vrm.add_vrm0_secondary_animation_group(armature_object_name=rig.name)
    ponytail = secondary.bone_groups[0]
    ponytail.comment = "Ponytail"
    ponytail.stiffiness = 0.8
    ponytail.gravity_power = 0.3
    ponytail.drag_force = 0.4
    ponytail.hit_radius = 0.02
    ponytail.bones.add().bone_name = "hair_1"
    ponytail.collider_groups.add().collider_group_uuid = colliders.uuid
    export(rig, path)


def export(rig, path):
    bpy.ops.object.select_all(action="DESELECT")
    result = bpy.ops.export_scene.vrm(filepath=path, armature_object_name=rig.name, ignore_warning=True)
    if result != {"FINISHED"} or not os.path.exists(path):
        raise RuntimeError(f"the add-on did not write {path}: {result}")
    print("wrote", path, os.path.getsize(path), "bytes")


def main():
    print("VRM Add-on for Blender", ".".join(map(str, io_scene_vrm.bl_info["version"])))
    meshes, rig = vrm_ready_humanoid()
    write_vrm1(meshes, rig, os.path.join(OUT_DIR, "addon_vrm1.vrm"))
    meshes, rig = vrm_ready_humanoid()
    write_vrm0(meshes, rig, os.path.join(OUT_DIR, "addon_vrm0.vrm"))


main()
