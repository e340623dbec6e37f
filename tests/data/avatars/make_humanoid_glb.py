"""Build tests/data/avatars/humanoid_arkit.glb with Blender (headless), as other software writes a rigged avatar.

    blender -b --factory-startup --python tests/data/avatars/make_humanoid_glb.py

(HUMANOID_SEGMENTS=92 HUMANOID_SMOOTH=1 HUMANOID_OUT=/tmp/big.glb makes a ~60k-triangle one for `avatar-studio bench
--avatar`, smooth-shaded as character models are: flat shading splits every vertex four ways.)

A small T-posed humanoid (head, eyes, mouth, torso, arms, legs) in one mesh, skinned to an armature whose bones
have common rig names (hips, spine, chest, neck, head, upper_arm.L, forearm.L, hand.L, thigh.L, shin.L, foot.L, ...),
with ARKit-named shape keys (jawOpen, eyeBlinkLeft/Right, mouthFunnel, mouthSmileLeft/Right), a base colour
texture (PNG, packed) on the skin and plain base colours on the clothing, eyes and mouth. Blender faces -Y
(the glTF exporter turns that into +Z) and is Z up.
"""

import math
import os
import tempfile

import bpy
from mathutils import Vector

OUT = os.environ.get("HUMANOID_OUT") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "humanoid_arkit.glb")
SEGMENTS = int(os.environ.get("HUMANOID_SEGMENTS", "20"))  # 92 makes a ~60k-triangle avatar for `bench --avatar`
SMOOTH = os.environ.get("HUMANOID_SMOOTH") == "1"  # smooth shading: vertices shared between faces, as in a character model
HEAD = Vector((0, 0, 1.62))
EYES = {"L": Vector((0.042, -0.105, 1.65)), "R": Vector((-0.042, -0.105, 1.65))}
MOUTH = Vector((0, -0.112, 1.565))
BONES = {  # name: (head, tail, parent)
    "hips": ((0, 0, 0.95), (0, 0, 1.05), None),
    "spine": ((0, 0, 1.05), (0, 0, 1.2), "hips"),
    "chest": ((0, 0, 1.2), (0, 0, 1.4), "spine"),
    "neck": ((0, 0, 1.4), (0, 0, 1.5), "chest"),
    "head": ((0, 0, 1.5), (0, 0, 1.78), "neck"),
    "hair_1": ((0, 0.15, 1.66), (0, 0.15, 1.54), "head"),  # a ponytail: the VRM 0.x file makes it a spring bone chain
    "hair_2": ((0, 0.15, 1.54), (0, 0.15, 1.42), "hair_1"),
}
PONYTAIL_Y = 0.122  # vertices behind the head's back (y = 0.12) are the ponytail's
for side, sign in (("L", 1), ("R", -1)):
    BONES.update({
        f"upper_arm.{side}": ((sign * 0.18, 0, 1.4), (sign * 0.45, 0, 1.4), "chest"),
        f"forearm.{side}": ((sign * 0.45, 0, 1.4), (sign * 0.7, 0, 1.4), f"upper_arm.{side}"),
        f"hand.{side}": ((sign * 0.7, 0, 1.4), (sign * 0.82, 0, 1.4), f"forearm.{side}"),
        f"thigh.{side}": ((sign * 0.09, 0, 0.92), (sign * 0.09, 0, 0.5), "hips"),
        f"shin.{side}": ((sign * 0.09, 0, 0.5), (sign * 0.09, 0, 0.1), f"thigh.{side}"),
        f"foot.{side}": ((sign * 0.09, 0, 0.1), (sign * 0.09, -0.12, 0.02), f"shin.{side}"),
    })


def material(name, color, image=None):
    mat = bpy.data.materials.new(name)
    mat.use_nodes = True
    principled = mat.node_tree.nodes["Principled BSDF"]
    principled.inputs["Base Color"].default_value = (*color, 1.0)
    if image is not None:
        texture = mat.node_tree.nodes.new("ShaderNodeTexImage")
        texture.image = image
        mat.node_tree.links.new(texture.outputs["Color"], principled.inputs["Base Color"])
    return mat


def skin_image():
    """64x64 skin tone with a bright teal band around the middle rows (easy to find in a render)."""
    image = bpy.data.images.new("skin_texture", 64, 64)
    pixels = []
    for y in range(64):
        for _x in range(64):
            band = 24 <= y < 40
            pixels += [0.05, 0.75, 0.7, 1.0] if band else [0.93, 0.72, 0.6, 1.0]
    image.pixels = pixels
    path = os.path.join(tempfile.mkdtemp(), "skin_texture.png")
    image.filepath_raw = path
    image.file_format = "PNG"
    image.save()
    image.pack()
    return image


def add(kind, location, scale, mat, rotation=(0, 0, 0)):
    if kind == "sphere":
        bpy.ops.mesh.primitive_uv_sphere_add(segments=SEGMENTS, ring_count=max(8, SEGMENTS * 3 // 5), location=location,
                                             rotation=rotation)
    else:
        bpy.ops.mesh.primitive_cylinder_add(vertices=max(8, SEGMENTS * 3 // 5), location=location, rotation=rotation)
    obj = bpy.context.active_object
    obj.scale = scale
    obj.data.materials.append(mat)
    return obj


def distance_to_segment(point, a, b):
    ab = b - a
    t = max(0.0, min(1.0, (point - a).dot(ab) / ab.length_squared))
    return (point - (a + t * ab)).length


def build_humanoid():
    """The skinned, shape-keyed humanoid in an empty scene: (mesh object "Body", armature object "Armature")."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    skin = material("Skin", (1, 1, 1), skin_image())
    cloth = material("Cloth", (0.15, 0.25, 0.65))
    eye = material("Eye", (0.02, 0.02, 0.03))
    mouth = material("Mouth", (0.45, 0.05, 0.08))
    hair = material("Hair", (0.35, 0.18, 0.05))
    parts = [
        add("sphere", HEAD, (0.12, 0.12, 0.14), skin),
        add("sphere", EYES["L"], (0.022, 0.01, 0.016), eye),
        add("sphere", EYES["R"], (0.022, 0.01, 0.016), eye),
        add("sphere", MOUTH, (0.04, 0.012, 0.012), mouth),
        add("cylinder", (0, 0, 1.17), (0.16, 0.11, 0.28), cloth),
        add("cylinder", (0, 0, 1.46), (0.045, 0.045, 0.06), skin),
        add("cylinder", (0, 0.15, 1.54), (0.025, 0.025, 0.12), hair),
    ]
    for sign in (1, -1):
        parts.append(add("cylinder", (sign * 0.44, 0, 1.4), (0.05, 0.05, 0.27), cloth, (0, math.pi / 2, 0)))
        parts.append(add("sphere", (sign * 0.76, 0, 1.4), (0.07, 0.035, 0.05), skin))
        parts.append(add("cylinder", (sign * 0.09, 0, 0.5), (0.065, 0.065, 0.45), cloth))
    bpy.ops.object.select_all(action="DESELECT")
    for obj in parts:
        obj.select_set(True)
    bpy.context.view_layer.objects.active = parts[0]
    bpy.ops.object.join()
    body = bpy.context.active_object
    body.name = "Body"
    if SMOOTH:
        bpy.ops.object.shade_smooth()
    bpy.ops.object.transform_apply(location=True, rotation=True, scale=True)

    bpy.ops.object.armature_add(location=(0, 0, 0))
    rig = bpy.context.active_object
    rig.name = "Armature"
    bpy.ops.object.mode_set(mode="EDIT")
    edit = rig.data.edit_bones
    edit.remove(edit[0])
    for name, (head, tail, parent) in BONES.items():
        bone = edit.new(name)
        bone.head, bone.tail = head, tail
        if parent:
            bone.parent = edit[parent]
    bpy.ops.object.mode_set(mode="OBJECT")

    groups = {name: body.vertex_groups.new(name=name) for name in BONES}
    segments = {name: (Vector(h), Vector(t)) for name, (h, t, _) in BONES.items()}
    for vertex in body.data.vertices:
        point = vertex.co
        if point.y > PONYTAIL_Y:
            nearest = min(("hair_1", "hair_2"), key=lambda n: distance_to_segment(point, *segments[n]))
        elif (point - HEAD).length < 0.2 and point.z > 1.48:
            nearest = "head"
        else:
            nearest = min((n for n in segments if not n.startswith("hair")),
                          key=lambda n: distance_to_segment(point, *segments[n]))
        groups[nearest].add([vertex.index], 1.0, "REPLACE")
    modifier = body.modifiers.new("Armature", "ARMATURE")
    modifier.object = rig
    body.parent = rig

    body.shape_key_add(name="Basis")
    keys = {name: body.shape_key_add(name=name) for name in
            ("jawOpen", "eyeBlinkLeft", "eyeBlinkRight", "mouthFunnel", "mouthSmileLeft", "mouthSmileRight")}
    for vertex in body.data.vertices:
        point = vertex.co.copy()
        index = vertex.index
        on_head = (point - HEAD).length < 0.2 and point.z > 1.48 and point.y < PONYTAIL_Y
        for side, centre in EYES.items():
            if (point - centre).length < 0.03:
                flat = Vector((point.x, point.y + 0.004, centre.z + (point.z - centre.z) * 0.05))
                keys[f"eyeBlink{'Left' if side == 'L' else 'Right'}"].data[index].co = flat
        if (point - MOUTH).length < 0.05:  # the mouth opens tall, rounds, widens at the corners
            keys["jawOpen"].data[index].co = Vector((point.x, point.y, MOUTH.z - 0.012 + (point.z - MOUTH.z) * 3.5))
            keys["mouthFunnel"].data[index].co = Vector((MOUTH.x + (point.x - MOUTH.x) * 0.5, point.y,
                                                         MOUTH.z + (point.z - MOUTH.z) * 2.0))
            for side, sign in (("Left", 1), ("Right", -1)):
                if sign * point.x > 0.015:
                    keys[f"mouthSmile{side}"].data[index].co = point + Vector((sign * 0.01, 0, 0.012))
        elif on_head and point.z < MOUTH.z - 0.005 and point.y < 0:
            keys["jawOpen"].data[index].co = point + Vector((0, 0, -0.03))
    return body, rig


def main():
    build_humanoid()
    bpy.ops.export_scene.gltf(filepath=OUT, export_format="GLB", export_skins=True, export_morph=True,
                              export_morph_normal=False, export_animations=False, export_yup=True, export_apply=False)
    print("wrote", OUT)


if __name__ == "__main__":  # make_vrm_addon.py imports the builder
    main()
