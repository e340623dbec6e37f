"""The avatar as a vispy visual: sparse CPU morph, GPU (or CPU) linear blend skinning, three-point lighting.

Why this split (measured, see render/bench.py): only the face vertices move with the 52 ARKit shapes, so
the morph and the normal update touch a small, contiguous prefix of the vertex buffers (vertices are
reordered at `set_avatar` so that moving ones come first). Normals of that region are blended per shape
(precomputed), a small matmul instead of recomputing face normals. Skinning moves everything, and the
vertex shader does it from a 55×3 float texture of joint matrices, so a frame uploads the face prefix and
2.6 kB of joints instead of the whole mesh. The CPU skinning path (`skinning="cpu"`) exists to measure
the choice and as a fallback. Closed, outward-wound pieces are drawn with back faces culled.

Imported materials may add passes, each only where a material asks for it: MToon's outline (the inverted hull:
the outlined faces again, pushed out along their normals, back faces only), then the alpha-blended primitives
(glTF BLEND) without depth writes, farthest first, mixed as display values as the framebuffer holds them.

All per-frame work happens in `_prepare_draw`, so `set_state` at any rate costs only a reference swap
and frames that are never drawn cost nothing.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from vispy import gloo
from vispy.scene.visuals import create_visual_node
from vispy.visuals import Visual
from vispy.visuals.shaders import Function
from vispy.visuals.transforms import ChainTransform, MatrixTransform, NullTransform, STTransform
from vispy.visuals.transforms.base_transform import InverseTransform

from studio.avatar.arkit import NUM_ARKIT
from studio.avatar.look import with_betas
from studio.avatar.model import AvatarModel
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS
from studio.avatar.skinning import Kinematics, batch_rodrigues, vertex_normals
from studio.cloth import CLOTH_REGIONS, SPRINGS, ClothSim, anchor_points, region_weights
from studio.frame import FrameState

SKINNING_PATHS = ("gpu", "cpu")
SKIN_INFLUENCES = 4

# Specular strength and shininess by part name, used where the avatar names no material.
_DEFAULT_SHADING: dict[str, tuple[float, float]] = {
    "skin": (0.18, 20.0),
    "lips": (0.35, 36.0),
    "eyes": (0.9, 160.0),
    "eye": (0.9, 160.0),
    "teeth": (0.45, 60.0),
    "tongue": (0.35, 30.0),
    "hair": (0.12, 14.0),
    "brows": (0.05, 8.0),
}
_FALLBACK_SHADING = (0.08, 10.0)
# Parts inside the mouth: the lips and cheeks hide them from the rim light behind the head. Lit by it, the
# cavity walls seen edge-on turned light grey when the mouth opened wide, and specks showed along a closed seam.
ENCLOSED_PARTS = frozenset({"mouth", "teeth", "tongue"})

_VERTEX_SHADER = """
attribute vec3 a_position;
attribute vec3 a_normal;
attribute vec3 a_color;
attribute vec3 a_material;  // specular, shininess, rim light reach
attribute vec4 a_cloth;  // how much the vertex follows each cloth spring (hair, shirt, left/right sleeve); or, with
                         // VRM spring chains, its chain, place along it (in joints) and share (the u_cloth are 0 then)
attribute vec2 a_uv;  // imported avatars: texture coordinate, atlas cell, (alpha factor, alpha cutoff)
attribute vec4 a_rect;
attribute vec2 a_alpha;
attribute vec4 a_shade;  // imported avatars: MToon shade colour (linear) and kind (0 lit, 1 toon, 2 unlit)
attribute vec4 a_toon;  // MToon shading shift, toony, rim fresnel power, rim lift
attribute vec4 a_rim;  // MToon rim colour (linear), rim lighting mix
attribute vec4 a_outline;  // MToon outline colour (linear), outline lighting mix
attribute vec2 a_outline_width;  // MToon outline width and mode (1: metres, 2: share of the screen height)
// The vertex's rows in two small tables: MToon UV animation (x, 0: still), VRM expression material binds (y, 0: none).
// One attribute for both: with GPU skinning the shader uses all 16 vertex inputs the GL allows.
attribute vec2 a_rows;
uniform float u_outline_pass;  // 1 while drawing the outline hull
uniform vec3 u_eye;
uniform vec3 u_view_dir;
uniform float u_height_per_depth;  // the screen's height, in the visual's units, one unit in front of the eye
uniform vec3 u_cloth0;
uniform vec3 u_cloth1;
uniform vec3 u_cloth2;
uniform vec3 u_cloth3;
$skin_declarations
varying vec3 v_position;
varying vec3 v_normal;
varying vec3 v_color;
varying vec3 v_material;
varying vec2 v_uv;
varying vec4 v_rect;
varying vec2 v_alpha;
varying vec4 v_shade;
varying vec4 v_toon;
varying vec4 v_rim;
varying vec4 v_outline;

void main() {
    vec3 position = a_position;
    vec3 normal = a_normal;
    $skin_body
    position += a_cloth.x * u_cloth0 + a_cloth.y * u_cloth1 + a_cloth.z * u_cloth2 + a_cloth.w * u_cloth3
              + $chain_offset(a_cloth);
    float depth = dot(position - u_eye, u_view_dir);
    position += normal * inversesqrt(max(dot(normal, normal), 1e-12))
              * $outline_reach(a_outline_width, depth * u_height_per_depth, u_outline_pass);
    v_position = position;
    v_normal = normal;
    vec4 bound = $bind_color(vec4(a_color, a_alpha.x), a_rows.y);
    v_color = bound.rgb;
    v_material = a_material;
    vec2 uv = $bind_uv(a_uv, a_rows.y);
    v_uv = $uv_motion(uv, a_rows.x);
    v_rect = a_rect;
    v_alpha = vec2(bound.a, a_alpha.y);
    v_shade = a_shade;
    v_toon = a_toon;
    v_rim = a_rim;
    v_outline = a_outline;
    gl_Position = $transform(vec4(position, 1.0));
}
"""

_GPU_SKIN_DECLARATIONS = """
attribute vec4 a_joints;
attribute vec4 a_weights;
uniform sampler2D u_joint_rows;  // 3 texels (rows of a 3x4 skinning matrix) per joint, one joint per line
uniform float u_joint_count;

vec4 joint_row(float joint, float row) {
    return texture2D(u_joint_rows, vec2((row + 0.5) / 3.0, (joint + 0.5) / u_joint_count));
}
"""

_GPU_SKIN_BODY = """
    vec4 r0 = vec4(0.0);
    vec4 r1 = vec4(0.0);
    vec4 r2 = vec4(0.0);
    for (int k = 0; k < 4; k++) {
        float w = a_weights[k];
        if (w > 0.0) {
            float j = a_joints[k];
            r0 += w * joint_row(j, 0.0);
            r1 += w * joint_row(j, 1.0);
            r2 += w * joint_row(j, 2.0);
        }
    }
    vec4 p = vec4(a_position, 1.0);
    position = vec3(dot(r0, p), dot(r1, p), dot(r2, p));
    normal = vec3(dot(r0.xyz, a_normal), dot(r1.xyz, a_normal), dot(r2.xyz, a_normal));
"""

_FRAGMENT_SHADER = """
varying vec3 v_position;
varying vec3 v_normal;
varying vec3 v_color;
varying vec3 v_material;
varying vec2 v_uv;
varying vec4 v_rect;
varying vec2 v_alpha;
varying vec4 v_shade;
varying vec4 v_toon;
varying vec4 v_rim;
varying vec4 v_outline;
uniform float u_outline_pass;
uniform float u_blend_pass;  // 1 while drawing alpha-blended primitives: the texel's alpha is the fragment's
uniform vec3 u_eye;
uniform vec3 u_up;
uniform vec3 u_key_dir;
uniform vec3 u_fill_dir;
uniform vec3 u_rim_dir;

void main() {
    vec3 n = normalize(v_normal);
    vec3 v = normalize(u_eye - v_position);
    float facing = dot(n, v);
    if (facing < 0.0) { n = -n; facing = -facing; }  // inner mouth, eyelid backs: light both sides
    vec4 texel = $texel(v_uv, v_rect, vec2(v_alpha.x, mix(v_alpha.y, 1.0 / 255.0, u_blend_pass)));
    vec3 base = v_color * texel.rgb;

    float hemi = 0.5 + 0.5 * dot(n, u_up);
    vec3 ambient = mix(vec3(0.10, 0.09, 0.09), vec3(0.26, 0.27, 0.30), hemi);
    float key = max(dot(n, u_key_dir), 0.0);
    float fill = max(dot(n, u_fill_dir), 0.0);
    float rim = pow(1.0 - facing, 3.0) * max(dot(n, u_rim_dir) + 0.4, 0.0) * v_material.z;

    vec3 h = normalize(u_key_dir + v);
    float highlight = pow(max(dot(n, h), 0.0), v_material.y) * v_material.x * step(0.0, key);
    vec3 hf = normalize(u_fill_dir + v);
    highlight += 0.35 * pow(max(dot(n, hf), 0.0), v_material.y) * v_material.x;

    vec3 color = base * (ambient + key * vec3(1.05, 1.0, 0.95) + fill * vec3(0.30, 0.33, 0.40))
               + rim * vec3(0.35, 0.37, 0.42) + highlight * vec3(1.0, 0.98, 0.95);
    color = $finish(color, base, v_shade.rgb * texel.rgb, n, v, u_key_dir, v_shade.a, v_toon, v_rim);
    color = $outline_color(color, v_outline, u_outline_pass);
    gl_FragColor = vec4(pow(clamp(color, 0.0, 1.0), vec3(1.0 / 2.2)), mix(1.0, texel.a, u_blend_pass));
}
"""


# The texture factor of a fragment's base colour and its opacity: 1, or (imported glTF/VRM avatars) the texel of its
# cell in the atlas, which repeats (fract) as glTF's default wrap does, times the alpha factor; an alpha-masked
# material's cut-out is discarded.
_PLAIN_TEXEL = """
vec4 texel(vec2 uv, vec4 rect, vec2 alpha) { return vec4(1.0); }
"""
_ATLAS_TEXEL = """
vec4 texel(vec2 uv, vec4 rect, vec2 alpha) {
    vec4 texel = texture2D($atlas, rect.xy + fract(uv) * rect.zw);
    if (texel.a * alpha.x < alpha.y) discard;
    return vec4(pow(texel.rgb, vec3(2.2)), texel.a * alpha.x);  // sRGB texture, linear light
}
"""
# The lit colour as the studio lights it, or (VRM materials) MToon's two tones: the shade colour where the key light
# does not reach, the base colour where it does, the step's width set by `toony` and its place by `shift`, plus its
# parametric rim light (brightest where the surface turns away from the eye, `toon.z` its fresnel power, `toon.w` its
# lift, `rim.a` how much the key light scales it); or unlit.
_STUDIO_LIGHT = """
vec3 finish(vec3 lit, vec3 base, vec3 shade, vec3 n, vec3 v, vec3 key, float kind, vec4 toon, vec4 rim) { return lit; }
"""
_TOON_LIGHT = """
vec3 finish(vec3 lit, vec3 base, vec3 shade, vec3 n, vec3 v, vec3 key, float kind, vec4 toon, vec4 rim) {
    if (kind < 0.5) return lit;
    if (kind > 1.5) return base;
    float edge = max(1.0 - toon.y, 1e-4);
    float lit_part = clamp((dot(n, key) + toon.x + edge) / (2.0 * edge), 0.0, 1.0);
    float fresnel = pow(clamp(1.0 - dot(n, v) + toon.w, 1e-6, 1.0), toon.z);
    return mix(shade, base, lit_part) + rim.rgb * fresnel * mix(1.0, max(dot(n, key), 0.0), rim.a);
}
"""
# MToon's outline, the usual inverted hull: in its own pass the vertices move out along their normals (by a width in
# metres, or by a share of the screen height at the vertex's depth) and the hull's back faces are drawn in the outline
# colour, mixed with the lit colour by its lighting mix. Avatars without an outline compile the no-op versions.
_NO_OUTLINE_REACH = """
float outline_reach(vec2 width, float screen_height, float pass) { return 0.0; }
"""
_OUTLINE_REACH = """
float outline_reach(vec2 width, float screen_height, float pass) {
    if (pass < 0.5 || width.y < 0.5) return 0.0;
    return width.y < 1.5 ? width.x : width.x * screen_height;
}
"""
# MToon's UV animation: the texture coordinates scrolled, then turned about the texture's centre, by the row of a
# small table (scroll x, scroll y, cos and sin of the turn) that the CPU writes each frame from the media time; the
# wrap-around (fract) happens in the fragment shader, as it does for any repeating texture.
_STILL_UV = """
vec2 uv_motion(vec2 uv, float row) { return uv; }
"""
_MOVING_UV = """
vec2 uv_motion(vec2 uv, float row) {
    vec4 motion = texture2D($table, vec2(0.5, (row + 0.5) / $rows));
    return mat2(motion.z, -motion.w, motion.w, motion.z) * (uv + motion.xy - 0.5) + 0.5;
}
"""
# VRM expression material binds: a material's base colour (with alpha factor) moved towards the expressions' targets
# and its texture scaled and offset, from a small table (one row per bound material, row 0 unchanged) that the CPU
# writes each frame from the expression weights. Avatars without binds compile the no-op versions.
_UNBOUND_COLOR = """
vec4 bind_color(vec4 color, float slot) { return color; }
"""
_UNBOUND_UV = """
vec2 bind_uv(vec2 uv, float slot) { return uv; }
"""
_BOUND_COLOR = """
vec4 bind_color(vec4 color, float slot) {
    float row = (slot + 0.5) / $rows;
    return color * texture2D($table, vec2(0.5, row)) + texture2D($table, vec2(0.5 / 3.0, row));
}
"""
_BOUND_UV = """
vec2 bind_uv(vec2 uv, float slot) {
    vec4 transform = texture2D($table, vec2(2.5 / 3.0, (slot + 0.5) / $rows));
    return uv * transform.xy + transform.zw;
}
"""
# VRM spring bones: a vertex moves by its own chain's joint displacements (a table, one line per chain, one texel per
# joint, written each frame from the spring bone thread) at its place along the chain, times its share of skin weight.
_NO_CHAINS = """
vec3 chain_offset(vec4 place) { return vec3(0.0); }
"""
_CHAIN_OFFSET = """
vec3 chain_offset(vec4 place) {
    float row = (place.x + 0.5) / $chains;
    float joint = min(floor(place.y), $joints - 2.0);
    vec3 root = texture2D($table, vec2((joint + 0.5) / $joints, row)).xyz;
    vec3 end = texture2D($table, vec2((joint + 1.5) / $joints, row)).xyz;
    return place.z * mix(root, end, clamp(place.y - joint, 0.0, 1.0));
}
"""
_NO_OUTLINE_COLOR = """
vec3 outline_color(vec3 lit, vec4 outline, float pass) { return lit; }
"""
_OUTLINE_COLOR = """
vec3 outline_color(vec3 lit, vec4 outline, float pass) {
    if (pass < 0.5) return lit;
    return outline.rgb * mix(vec3(1.0), lit, outline.a);
}
"""


class _FrameCosts:
    morph_ms: float = 0.0
    normals_ms: float = 0.0
    joints_ms: float = 0.0
    cpu_skin_ms: float = 0.0
    upload_ms: float = 0.0


class AvatarMesh:
    """CPU side of the avatar: reordered arrays, the sparse morph and normal update, CPU skinning."""

    def __init__(self, model: AvatarModel, betas: np.ndarray | None = None) -> None:
        self.model = model = with_betas(model, betas)
        rest = np.asarray(model.v_template, np.float64)
        joints = np.asarray(model.joint_regressor, np.float64) @ rest
        faces = np.asarray(model.faces, np.int64)

        expr = np.asarray(model.expr_dirs, np.float32)
        moving = np.abs(expr).reshape(len(rest), -1).max(axis=1) > 1e-7
        has_correctives = model.pose_dirs is not None and bool(np.any(model.pose_dirs))
        if has_correctives:
            moving |= np.abs(model.pose_dirs).reshape(len(rest), -1).max(axis=1) > 1e-7
        face_touches = moving[faces].any(axis=1)
        shading = np.zeros(len(rest), bool)
        shading[faces[face_touches].ravel()] = True
        shading |= moving
        # Order: moving vertices, then the ones whose normals they bend, then the still rest.
        order = np.concatenate([
            np.flatnonzero(moving), np.flatnonzero(shading & ~moving), np.flatnonzero(~shading)
        ])
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        self.order = order
        self.num_moving = int(moving.sum())
        self.num_shading = int(shading.sum())
        self.faces = inverse[faces].astype(np.uint32)

        self.rest = rest[order].astype(np.float32)
        self.positions = self.rest.copy()
        self.normals = vertex_normals(self.positions, self.faces)
        moving_dirs = expr[order[: self.num_moving]]  # (M, 3, columns)
        # Only the shapes that move something, one row each (K, M*3): a frame blends the rows of its non-zero weights.
        self.shapes = np.flatnonzero(np.abs(moving_dirs).max(axis=(0, 1), initial=0.0) > 0)
        self.morph_rows = np.ascontiguousarray(moving_dirs[:, :, self.shapes].reshape(self.num_moving * 3, len(self.shapes)).T)
        self.pose_basis = None
        if has_correctives:
            pose_dirs = np.asarray(model.pose_dirs, np.float32)[order[: self.num_moving]]
            self.pose_basis = np.ascontiguousarray(pose_dirs.reshape(self.num_moving * 3, pose_dirs.shape[2]))
        self.morph_rest = self.rest[: self.num_moving].reshape(-1).copy()

        # Faces whose normals feed the shading prefix, with corners outside it sent to a dump slot.
        shading_faces = self.faces[(self.faces < self.num_shading).any(axis=1)].astype(np.int64)
        self._shading_faces = shading_faces
        self._shading_corners = np.where(shading_faces < self.num_shading, shading_faces, self.num_shading).ravel()
        self.normal_rest = self.normals[: self.num_shading].reshape(-1).copy()
        self.normal_rows = self._normal_rows(moving_dirs)
        self.two_sided = two_sided_faces(self.faces.astype(np.int64), self.rest.astype(np.float64))
        self._set_mtoon(model, order)

        self.kinematics = Kinematics(model.parents, joints)
        joint_expr = np.einsum(
            "jv,vck->jck", np.asarray(model.joint_regressor, np.float64)[:, moving], expr[moving].astype(np.float64)
        )
        self._joint_expr = joint_expr if np.abs(joint_expr).max(initial=0.0) > 1e-9 else None
        weights = np.asarray(model.skin_weights, np.float32)[order]
        top = np.argsort(-weights, axis=1)[:, :SKIN_INFLUENCES]
        top_weights = np.take_along_axis(weights, top, axis=1)
        top_weights /= np.maximum(top_weights.sum(axis=1, keepdims=True), 1e-8)
        self.joint_indices = top.astype(np.float32)
        self.joint_weights = top_weights.astype(np.float32)
        self._top = top
        # Avatar colours are display (sRGB) values, as picked by eye and stored by the default avatar's builder;
        # lighting needs them linear, and the fragment shader encodes the lit result back to display gamma.
        self.colors = np.power(np.clip(np.asarray(model.colors(), np.float32)[order], 0.0, 1.0), 2.2)
        self.material = self._materials()[order]
        self.texture = model.texture
        if model.texture is not None:
            self.uvs = np.asarray(model.uvs, np.float32)[order]
            self.texture_rects = np.asarray(model.texture_rects, np.float32)[order]
            self.alpha = np.asarray(model.alpha, np.float32)[order]
        self.shading = None if model.shading is None else np.asarray(model.shading, np.float32)[order]
        self.bind_slots = None if model.material_slot is None else np.asarray(model.material_slot, np.float32)[order]
        self.spring_place = None if model.spring_place is None else np.asarray(model.spring_place, np.float32)[order]
        cloth = region_weights(model)
        self.cloth_weights = cloth[order]
        self.cloth_anchors = np.hstack([anchor_points(model, cloth), np.ones((len(CLOTH_REGIONS), 1))])
        self.cloth_joints = np.array([JOINT_INDEX[SPRINGS[region].joint] for region in CLOTH_REGIONS])
        self.costs = _FrameCosts()
        self._arkit = np.zeros(expr.shape[2], np.float32)
        self._pose_feature = None

    def _materials(self) -> np.ndarray:
        """Per vertex: specular strength, shininess and how much rim light reaches it (0 inside the mouth)."""
        out = np.empty((self.model.num_vertices, 3), np.float32)
        out[:] = (*_FALLBACK_SHADING, 1.0)
        if self.model.part_labels is None:
            out[:] = (*_DEFAULT_SHADING["skin"], 1.0)
            return out
        for i, part in enumerate(self.model.part_names):
            material = self.model.materials.get(part)
            if material is not None:
                value = (material.specular, material.shininess)
            else:
                value = _DEFAULT_SHADING.get(part.lower(), _FALLBACK_SHADING)
            out[self.model.part_labels == i] = (*value, 0.0 if part.lower() in ENCLOSED_PARTS else 1.0)
        return out

    def uv_motion_table(self, time_s: float) -> np.ndarray:
        """(K, 1, 4) rows of the UV animation table at this media time: scroll x, scroll y (wrapped to one texture),
        cos and sin of the turn; worked out in double precision so that hours in, the motion stays smooth."""
        speeds = self.uv_motion_speeds
        offsets = np.mod(speeds[:, :2] * float(time_s), 1.0)
        angles = np.mod(speeds[:, 2] * float(time_s), 2 * np.pi)
        return np.column_stack([offsets, np.cos(angles), np.sin(angles)]).astype(np.float32)[:, None, :]

    def morph(self, arkit: np.ndarray, pose: np.ndarray | None = None) -> bool:
        """Update the moving prefix of `positions` and the shading prefix of `normals`; False if unchanged."""
        arkit = self.model.morph_weights(arkit)  # the 52 ARKit weights, and the avatar's VRM emotions read from them
        pose_feature = None
        if self.pose_basis is not None and pose is not None:
            rotations = batch_rodrigues(pose[1:])
            pose_feature = (rotations - np.eye(3)).reshape(-1).astype(np.float32)
        if np.array_equal(arkit, self._arkit) and (
            pose_feature is None or np.array_equal(pose_feature, self._pose_feature)
        ):
            return False
        start = time.perf_counter()
        self._arkit = arkit.copy()
        self._pose_feature = pose_feature
        weights = arkit[self.shapes]
        active = np.flatnonzero(weights)
        moved = _blend_rows(self.morph_rest, self.morph_rows, weights, active)
        if pose_feature is not None:
            moved += self.pose_basis @ pose_feature
        self.positions[: self.num_moving] = moved.reshape(-1, 3)
        mid = time.perf_counter()
        normals = _blend_rows(self.normal_rest, self.normal_rows, weights, active).reshape(-1, 3)
        normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
        self.normals[: self.num_shading] = normals
        end = time.perf_counter()
        self.costs.morph_ms = (mid - start) * 1e3
        self.costs.normals_ms = (end - mid) * 1e3
        return True

    def _normal_rows(self, moving_dirs: np.ndarray) -> np.ndarray:
        """Per-shape change of the shading-region normals at full weight, one row per moving shape (K, S*3).

        Blending normals linearly (then renormalising) costs one small matmul per frame instead of
        recomputing face normals; exact for one shape at a time, close for mixes.
        """
        rows = np.zeros((len(self.shapes), self.num_shading * 3), np.float32)
        for row, k in enumerate(self.shapes):
            positions = self.rest.copy()
            positions[: self.num_moving] += moving_dirs[:, :, k]
            rows[row] = (self._shading_normals(positions) - self.normals[: self.num_shading]).reshape(-1)
        return rows

    def _set_mtoon(self, model: AvatarModel, order: np.ndarray) -> None:
        """Rim and outline per vertex, and the faces each pass draws: opaque ones (culled or two-sided), the outline
        hull (opaque faces whose material has an outline), and each alpha-blended primitive with what orders it (its
        material's render queue, then the depth of its rest centre, carried by the joint that carries most of it) and
        whether it writes depth."""
        self.rim = None if model.rim is None else np.asarray(model.rim, np.float32)[order]
        self.uv_motion_speeds: np.ndarray | None = None  # (K, 3) scroll x, scroll y, turn; row 0 still
        self.uv_motion_rows = np.zeros(len(order), np.float32)
        if model.uv_motion is not None:
            speeds, rows = np.unique(np.asarray(model.uv_motion, np.float64)[order], axis=0, return_inverse=True)
            still = np.zeros((1, 3))
            self.uv_motion_speeds = np.vstack([still, speeds])
            self.uv_motion_rows = np.where((speeds[rows.ravel()] == 0).all(axis=1), 0, rows.ravel() + 1).astype(np.float32)
        self.outline = None if model.outline is None else np.asarray(model.outline, np.float32)[order]
        face_group = np.full(len(self.faces), -1)
        if model.blend_group is not None:
            face_group = np.asarray(model.blend_group)[order][self.faces[:, 0]]
        self.opaque_faces = face_group < 0
        self.outline_faces = np.zeros(len(self.faces), bool)
        if self.outline is not None:
            self.outline_faces = self.opaque_faces & (self.outline[self.faces, 4] > 0).all(axis=1)
        weights = np.asarray(model.skin_weights, np.float32)[order]
        queue = np.zeros((len(order), 2), np.int64)
        if model.blend_queue is not None:
            queue = np.asarray(model.blend_queue, np.int64)[order]
        self.blend_pieces: list[BlendPiece] = []
        for group in np.unique(face_group[face_group >= 0]):
            faces = np.flatnonzero(face_group == group)
            corners = np.unique(self.faces[faces])
            joint = int(np.argmax(weights[corners].sum(axis=0)))
            piece_queue, depth_write = queue[corners[0]]
            self.blend_pieces.append(BlendPiece(faces, self.rest[corners].mean(axis=0), joint, int(piece_queue),
                                                bool(depth_write)))

    def _shading_normals(self, p: np.ndarray) -> np.ndarray:
        """Exact smooth normals of the shading prefix for vertex positions p."""
        f = self._shading_faces
        face_normals = np.cross(p[f[:, 1]] - p[f[:, 0]], p[f[:, 2]] - p[f[:, 0]])
        corner_normals = np.repeat(face_normals, 3, axis=0)
        size = self.num_shading + 1
        summed = np.stack(
            [np.bincount(self._shading_corners, corner_normals[:, c], minlength=size)[:-1] for c in range(3)], axis=1
        )
        lengths = np.linalg.norm(summed, axis=1, keepdims=True)
        return (summed / np.maximum(lengths, 1e-12)).astype(np.float32)

    def joint_rows(self, pose: np.ndarray, transl: np.ndarray) -> np.ndarray:
        """Skinning matrices as a (55, 3, 4) float32 array: the rows the shader reads."""
        start = time.perf_counter()
        joints = None
        if self._joint_expr is not None:
            joints = self.kinematics.rest_joints + self._joint_expr @ self._arkit.astype(np.float64)
        rows = self.kinematics.skinning_matrices(pose, transl, joints)[:, :3, :].astype(np.float32)
        self.costs.joints_ms = (time.perf_counter() - start) * 1e3
        return rows

    def skin_cpu(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posed positions and normals (V, 3) from the current morphed mesh, the same maths as the shader."""
        start = time.perf_counter()
        blended = np.einsum("vk,vkab->vab", self.joint_weights, rows[self._top])
        positions = np.einsum("vab,vb->va", blended[:, :, :3], self.positions) + blended[:, :, 3]
        normals = np.einsum("vab,vb->va", blended[:, :, :3], self.normals)
        self.costs.cpu_skin_ms = (time.perf_counter() - start) * 1e3
        return positions.astype(np.float32), normals.astype(np.float32)

    def posed_vertices(self, state: FrameState) -> np.ndarray:
        """Posed vertices (V, 3) in the model's own vertex order, for projecting regions to the screen."""
        self.morph(state.arkit, state.pose)
        positions, _ = self.skin_cpu(self.joint_rows(state.pose, state.transl))
        out = np.empty_like(positions)
        out[self.order] = positions
        return out


@dataclasses.dataclass(frozen=True)
class BlendPiece:
    """An alpha-blended primitive: its faces, the rest point whose depth orders it and the joint that carries that
    point, its material's render queue (lower first) and whether it writes depth (MToon transparentWithZWrite)."""

    faces: np.ndarray
    centre: np.ndarray
    joint: int
    queue: int = 0
    depth_write: bool = False


def _blend_rows(rest: np.ndarray, rows: np.ndarray, weights: np.ndarray, active: np.ndarray) -> np.ndarray:
    """rest + Σ weights[k] · rows[k] over the non-zero weights only (a talking face moves a few shapes at a time)."""
    if len(active) == 0:
        return rest.copy()
    if len(active) == len(weights):
        return rest + weights @ rows
    return rest + weights[active] @ rows[active]


def two_sided_faces(faces: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Faces (bool per face) that must be drawn from both sides.

    Each connected piece of the mesh that bounds a solid with outward-facing triangles (closed with a
    positive volume, or with small holes and its signed volume about its centre within 10% of the
    unsigned one, like a head with a neck hole) is drawn with back faces culled: that saves about a quarter of the
    software rasteriser's time. Inward-wound, inconsistently wound or sheet-like pieces keep both sides.
    Vertices at one point (split along UV or normal seams, as glTF exporters write them) count as one: else a
    textured sphere would be open along its seam and drawn from both sides. Triangles that this leaves without
    area (at a sphere's pole) show nothing: they follow the piece they touch.
    """
    _, welded = np.unique(np.round(positions, 6), axis=0, return_inverse=True)
    welded = welded.ravel()
    points = np.zeros((int(welded.max()) + 1, 3))
    points[welded] = positions
    faces = welded[faces]
    flat = (faces[:, 0] == faces[:, 1]) | (faces[:, 1] == faces[:, 2]) | (faces[:, 2] == faces[:, 0])
    out = np.zeros(len(faces), bool)
    out[~flat] = _two_sided_welded(faces[~flat], points)
    touching = np.ones(len(points), bool)
    touching[faces[~flat].ravel()] = np.repeat(out[~flat], 3)
    out[flat] = touching[faces[flat, 0]]
    return out


def _two_sided_welded(faces: np.ndarray, positions: np.ndarray) -> np.ndarray:
    component = _face_components(faces, len(positions))
    directed = faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2).astype(np.int64)
    edges = np.sort(directed, axis=1)
    _, inverse, counts = np.unique(edges[:, 0] * len(positions) + edges[:, 1], return_inverse=True, return_counts=True)
    boundary = (counts[inverse] == 1).reshape(-1, 3)
    edge_vectors = positions[directed[:, 1]] - positions[directed[:, 0]]
    boundary_length = (np.linalg.norm(edge_vectors, axis=1).reshape(-1, 3) * boundary).sum(axis=1)
    _, inverse, counts = np.unique(directed[:, 0] * len(positions) + directed[:, 1], return_inverse=True,
                                   return_counts=True)
    face_misoriented = (counts[inverse] > 1).reshape(-1, 3).any(axis=1)  # a neighbour winds the other way
    two_sided = np.ones(len(faces), bool)
    for piece in np.unique(component):
        selected = component == piece
        if face_misoriented[selected].any():
            continue
        tri = positions[faces[selected]]
        centre = tri.reshape(-1, 3).mean(axis=0)
        a, b, c = tri[:, 0] - centre, tri[:, 1] - centre, tri[:, 2] - centre
        volumes = np.einsum("ij,ij->i", a, np.cross(b, c))
        perimeter = float(boundary_length[selected].sum())
        if perimeter > 0:
            area = float(np.linalg.norm(np.cross(b - a, c - a), axis=1).sum()) / 2
            small_holes = perimeter**2 < 2.0 * area  # a neck hole in a head, not a cap or a sheet
            outward = small_holes and volumes.sum() >= 0.9 * np.abs(volumes).sum()
        else:
            outward = volumes.sum() > 0
        two_sided[selected] = not outward
    return two_sided


def _face_components(faces: np.ndarray, vertex_count: int) -> np.ndarray:
    """Connected-component label of each face (union-find by min-label hooking and pointer jumping)."""
    parent = np.arange(vertex_count)
    a = faces[:, [0, 1, 2]].ravel()
    b = faces[:, [1, 2, 0]].ravel()
    while True:
        root_a, root_b = parent[a], parent[b]
        differ = root_a != root_b
        if not differ.any():
            break
        np.minimum.at(parent, np.maximum(root_a, root_b)[differ], np.minimum(root_a, root_b)[differ])
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
    return parent[faces[:, 0]]


class AvatarVisual(Visual):
    """Draws one avatar, lit by a key, fill and rim light that follow the camera."""

    def __init__(self, model: AvatarModel | None = None, skinning: str = "gpu") -> None:
        if skinning not in SKINNING_PATHS:
            raise ValueError(f"skinning={skinning!r}; allowed: {', '.join(SKINNING_PATHS)}")
        self.skinning_path = skinning
        vertex = _VERTEX_SHADER.replace("$skin_declarations", _GPU_SKIN_DECLARATIONS if skinning == "gpu" else "")
        vertex = vertex.replace("$skin_body", _GPU_SKIN_BODY if skinning == "gpu" else "")
        Visual.__init__(self, vcode=vertex, fcode=_FRAGMENT_SHADER)
        self.set_gl_state("opaque", depth_test=True, cull_face=False)
        self._draw_mode = "triangles"
        self.mesh: AvatarMesh | None = None
        self._state = FrameState()
        self._dirty = False
        self._positions: gloo.VertexBuffer | None = None
        self._normals: gloo.VertexBuffer | None = None
        self._joint_texture: gloo.Texture2D | None = None
        self._light_signature = None
        self._face_groups: list[tuple[gloo.IndexBuffer, bool]] = []
        self._outline_faces: gloo.IndexBuffer | None = None
        self._uv_motion_texture: gloo.Texture2D | None = None
        self._bind_texture: gloo.Texture2D | None = None
        self._chain_texture: gloo.Texture2D | None = None
        self._blend_pieces: list[tuple[gloo.IndexBuffer, BlendPiece]] = []
        self._rows = np.tile(np.eye(3, 4, dtype=np.float32), (NUM_JOINTS, 1, 1))
        self._eye = np.zeros(3, np.float32)
        self._view_dir = np.array([0.0, 0.0, -1.0], np.float32)
        self.cloth = ClothSim()
        self.vertices_drawn = 0  # summed over draws: the work the mesh level of detail changes
        self.triangles_drawn = 0
        if model is not None:
            self.set_avatar(model)

    @property
    def costs(self) -> _FrameCosts:
        return self.mesh.costs if self.mesh is not None else _FrameCosts()

    def set_avatar(self, model: AvatarModel, betas: np.ndarray | None = None, mesh: AvatarMesh | None = None) -> None:
        """Replace the avatar (precomputes everything the per-frame path needs, unless `mesh` brings it)."""
        self.mesh = mesh = mesh if mesh is not None else AvatarMesh(model, betas)
        self._positions = gloo.VertexBuffer(mesh.positions)
        self._normals = gloo.VertexBuffer(mesh.normals)
        opaque = mesh.opaque_faces
        self._face_groups = [
            (gloo.IndexBuffer(mesh.faces[selected]), cull)
            for selected, cull in ((opaque & mesh.two_sided, False), (opaque & ~mesh.two_sided, True))
            if selected.any()
        ]
        self._outline_faces = gloo.IndexBuffer(mesh.faces[mesh.outline_faces]) if mesh.outline_faces.any() else None
        self._blend_pieces = [(gloo.IndexBuffer(mesh.faces[piece.faces]), piece) for piece in mesh.blend_pieces]
        program = self.shared_program
        program["a_position"] = self._positions
        program["a_normal"] = self._normals
        program["a_color"] = gloo.VertexBuffer(mesh.colors)
        program["a_material"] = gloo.VertexBuffer(mesh.material)
        self._set_chains(mesh)
        self._set_surface(mesh)
        self.cloth.set_spring_bones(mesh.model.spring_bones)  # an imported avatar's VRM spring chains, if any
        self._set_cloth_offsets(np.zeros((len(CLOTH_REGIONS), 3), np.float32))
        if self.skinning_path == "gpu":
            program["a_joints"] = gloo.VertexBuffer(mesh.joint_indices)
            program["a_weights"] = gloo.VertexBuffer(mesh.joint_weights)
            self._joint_texture = gloo.Texture2D(
                np.zeros((NUM_JOINTS, 3, 4), np.float32), internalformat="rgba32f", interpolation="nearest"
            )
            program["u_joint_rows"] = self._joint_texture
            program["u_joint_count"] = float(NUM_JOINTS)
        self._dirty = True
        self.update()

    def _set_surface(self, mesh: AvatarMesh) -> None:
        """Vertex colours alone, or times the avatar's texture atlas (with alpha mask) and with MToon-like or unlit
        shading where an imported avatar's materials ask for it."""
        program = self.shared_program
        count = len(mesh.rest)
        if mesh.texture is None:
            # Reads none of them, but they stay vertex buffers (zeros): vispy keeps a constant attribute as an array and,
            # when a texel/finish swap rebuilds the shader, re-applies that array as a one-wide vertex buffer, which
            # fails at the next draw ("data.shape[-1] must be 2 not 1 for a_uv").
            program.frag["texel"] = Function(_PLAIN_TEXEL)
            uvs, rects, alpha = (np.zeros((count, n), np.float32) for n in (2, 4, 2))
        else:
            texel = Function(_ATLAS_TEXEL)
            texel["atlas"] = gloo.Texture2D(mesh.texture, interpolation="linear", wrapping="clamp_to_edge")
            program.frag["texel"] = texel
            uvs, rects, alpha = mesh.uvs, mesh.texture_rects, mesh.alpha
        shading = mesh.shading if mesh.shading is not None else np.zeros((count, 6), np.float32)
        rim = mesh.rim if mesh.rim is not None else np.zeros((count, 6), np.float32)
        outline = mesh.outline if mesh.outline is not None else np.zeros((count, 6), np.float32)
        program.frag["finish"] = Function(_TOON_LIGHT if mesh.shading is not None else _STUDIO_LIGHT)
        has_outline = self._outline_faces is not None
        program.vert["outline_reach"] = Function(_OUTLINE_REACH if has_outline else _NO_OUTLINE_REACH)
        self._uv_motion_texture = None
        if mesh.uv_motion_speeds is None or mesh.texture is None:
            program.vert["uv_motion"] = Function(_STILL_UV)
        else:
            motion = Function(_MOVING_UV)
            self._uv_motion_texture = gloo.Texture2D(mesh.uv_motion_table(0.0), internalformat="rgba32f",
                                                     interpolation="nearest")
            motion["table"] = self._uv_motion_texture
            motion["rows"] = float(len(mesh.uv_motion_speeds))
            program.vert["uv_motion"] = motion
        self._set_material_binds(mesh)
        slots = mesh.bind_slots if mesh.bind_slots is not None and self._bind_texture is not None else 0.0 * mesh.uv_motion_rows
        program["a_rows"] = gloo.VertexBuffer(np.ascontiguousarray(np.column_stack([mesh.uv_motion_rows, slots])))
        program.frag["outline_color"] = Function(_OUTLINE_COLOR if has_outline else _NO_OUTLINE_COLOR)
        program["a_uv"] = gloo.VertexBuffer(uvs)
        program["a_rect"] = gloo.VertexBuffer(rects)
        program["a_alpha"] = gloo.VertexBuffer(alpha)
        program["a_shade"] = gloo.VertexBuffer(np.ascontiguousarray(shading[:, :4]))
        program["a_toon"] = gloo.VertexBuffer(np.ascontiguousarray(np.hstack([shading[:, 4:], rim[:, 3:5]])))
        program["a_rim"] = gloo.VertexBuffer(np.ascontiguousarray(rim[:, [0, 1, 2, 5]]))
        program["a_outline"] = gloo.VertexBuffer(np.ascontiguousarray(outline[:, [0, 1, 2, 5]]))
        program["a_outline_width"] = gloo.VertexBuffer(np.ascontiguousarray(outline[:, 3:5]))
        program["u_outline_pass"] = 0.0
        program["u_blend_pass"] = 0.0

    def _set_material_binds(self, mesh: AvatarMesh) -> None:
        program = self.shared_program
        binds = mesh.model.material_binds
        self._bind_texture = None
        if binds is None or mesh.bind_slots is None:
            program.vert["bind_color"] = Function(_UNBOUND_COLOR)
            program.vert["bind_uv"] = Function(_UNBOUND_UV)
            return
        table = binds.table(np.zeros(NUM_ARKIT, np.float32))
        self._bind_texture = gloo.Texture2D(table, internalformat="rgba32f", interpolation="nearest")
        for name, code in (("bind_color", _BOUND_COLOR), ("bind_uv", _BOUND_UV)):
            function = Function(code)
            function["table"] = self._bind_texture
            function["rows"] = float(len(table))
            program.vert[name] = function

    def set_cloth(self, regions: tuple[str, ...]) -> None:
        """Which cloth springs run (none: the cloth is still and costs nothing per frame)."""
        if tuple(regions) != self.cloth.regions:
            self.cloth.set_regions(tuple(regions))
            self._set_cloth_offsets(self.cloth.offsets)
            self.update()

    def _set_chains(self, mesh: AvatarMesh) -> None:
        """Cloth weights per region, or (an avatar with VRM spring chains and vertex places on them) each vertex's
        chain and place, with the chains' joint displacements in a texture."""
        program = self.shared_program
        rig = mesh.model.spring_bones
        self._chain_texture = None
        if rig is None or mesh.spring_place is None:
            program.vert["chain_offset"] = Function(_NO_CHAINS)
            program["a_cloth"] = gloo.VertexBuffer(mesh.cloth_weights)
            return
        chains, joints = rig.rest.shape[:2]
        self._chain_texture = gloo.Texture2D(np.zeros((chains, joints, 4), np.float32), internalformat="rgba32f",
                                             interpolation="nearest")
        function = Function(_CHAIN_OFFSET)
        function["table"] = self._chain_texture
        function["chains"] = float(chains)
        function["joints"] = float(joints)
        program.vert["chain_offset"] = function
        places = np.column_stack([mesh.spring_place, np.zeros(len(mesh.spring_place), np.float32)])
        program["a_cloth"] = gloo.VertexBuffer(np.ascontiguousarray(places, np.float32))

    def _set_cloth_offsets(self, offsets: np.ndarray) -> None:
        chains = self._chain_texture is not None
        for index, offset in enumerate(offsets):
            self.shared_program[f"u_cloth{index}"] = (0.0, 0.0, 0.0) if chains else tuple(float(v) for v in offset)
        if chains:
            moved = self.cloth.chain_offsets if self.cloth.regions else None
            table = np.zeros((*self.cloth.bones.rig.rest.shape[:2], 4), np.float32)
            if moved is not None:
                table[:, :, :3] = moved
            self._chain_texture.set_data(table)

    def _step_cloth(self, rows: np.ndarray, time_s: float) -> None:
        """Springs follow where the region anchors ride now (their joints' skinning matrices)."""
        if not self.cloth.regions:
            return
        mesh = self.mesh
        anchors = np.einsum("rij,rj->ri", rows[mesh.cloth_joints], mesh.cloth_anchors)
        self._set_cloth_offsets(self.cloth.step(time_s, anchors, rows))

    def set_state(self, state: FrameState) -> None:
        """Show this frame at the next draw (cheap: the work happens once per drawn frame)."""
        self._state = state
        self._dirty = True
        self.update()

    def update_geometry(self) -> None:
        """Morph, pose and upload for the current state now (normally done by the draw)."""
        if self.mesh is None or not self._dirty:
            return
        mesh = self.mesh
        state = self._state
        self._dirty = False
        morphed = mesh.morph(state.arkit, state.pose)
        rows = mesh.joint_rows(state.pose, state.transl)
        self._rows = rows
        self._step_cloth(rows, state.media_time_s)
        if self._uv_motion_texture is not None:
            self._uv_motion_texture.set_data(mesh.uv_motion_table(state.media_time_s))
        if self._bind_texture is not None:
            self._bind_texture.set_data(mesh.model.material_binds.table(state.arkit))
        if self.skinning_path == "gpu":
            start = time.perf_counter()
            if morphed:
                self._positions.set_subdata(mesh.positions[: mesh.num_moving])
                self._normals.set_subdata(mesh.normals[: mesh.num_shading])
            self._joint_texture.set_data(rows)
        else:
            positions, normals = mesh.skin_cpu(rows)
            start = time.perf_counter()
            self._positions.set_data(positions)
            self._normals.set_data(normals)
        mesh.costs.upload_ms = (time.perf_counter() - start) * 1e3

    def draw(self) -> None:
        """Opaque parts that need both sides, then closed outward ones with back faces culled; then (where materials ask
        for them) the outline hull, and the alpha-blended primitives farthest first without writing depth."""
        if not self.visible or self._prepare_draw(view=self) is False:
            return
        self._configure_gl_state()
        self.vertices_drawn += len(self.mesh.rest)
        self.triangles_drawn += len(self.mesh.faces)
        program = self.shared_program
        for indices, cull in self._face_groups:
            gloo.set_state(cull_face=cull)
            self._program.draw("triangles", indices)
        if self._outline_faces is not None:
            program["u_outline_pass"] = 1.0
            gloo.set_state(cull_face="front")  # the pushed-out hull's far side shows around the silhouette
            self._program.draw("triangles", self._outline_faces)
            program["u_outline_pass"] = 0.0
        if self._blend_pieces:
            program["u_blend_pass"] = 1.0
            gloo.set_state(blend=True, depth_mask=False,
                           blend_func=("src_alpha", "one_minus_src_alpha", "one", "one_minus_src_alpha"))
            for indices, depth_write in self.blend_order():
                gloo.set_state(depth_mask=depth_write)
                for side in ("front", "back"):  # a piece's far side, then its near side
                    gloo.set_state(cull_face=side)
                    self._program.draw("triangles", indices)
            gloo.set_state(blend=False, depth_mask=True)
            program["u_blend_pass"] = 0.0
        gloo.set_state(cull_face=False)
        gloo.set_cull_face("back")

    def blend_order(self) -> list[tuple[gloo.IndexBuffer, bool]]:
        """The alpha-blended primitives (faces, writes depth) in drawing order: by render queue, then farthest from
        the eye first, as posed now."""
        rows = self._rows
        keys = []
        for _, piece in self._blend_pieces:
            posed = rows[piece.joint, :, :3] @ piece.centre + rows[piece.joint, :, 3]
            keys.append((piece.queue, -float(np.dot(posed - self._eye, self._view_dir))))
        return [(self._blend_pieces[i][0], self._blend_pieces[i][1].depth_write)
                for i in sorted(range(len(keys)), key=keys.__getitem__)]

    def _prepare_draw(self, view) -> bool:
        if self.mesh is None:
            return False
        self.update_geometry()
        self._set_lights(view)
        return True

    def _set_lights(self, view) -> None:
        """Place the three lights relative to the current camera, in the visual's own coordinates."""
        signature = _transform_signature(view.transforms.get_transform("visual", "render"))
        if signature is not None and signature == self._light_signature:
            return
        self._light_signature = signature
        to_visual = view.transforms.get_transform("render", "visual")
        ndc = np.array([[0, 0, -1, 1], [0, 0, 1, 1], [0, 1, -1, 1], [1, 0, -1, 1], [0.5, 0, -1, 1], [0.5, 0, 1, 1]])
        points = to_visual.map(ndc)
        points = points[:, :3] / points[:, 3:4]
        near, far, near_up, near_right, side_near, side_far = points
        forward = _unit(far - near)
        up = _unit(near_up - near)
        right = _unit(near_right - near)
        eye = _closest_point(near, forward, side_near, _unit(side_far - side_near))
        program = self.shared_program
        program["u_eye"] = eye
        program["u_view_dir"] = forward
        program["u_height_per_depth"] = 2.0 * float(np.linalg.norm(near_up - near)) / max(
            float(np.dot(near - eye, forward)), 1e-9)
        self._eye, self._view_dir = eye, forward
        program["u_up"] = _unit(up - forward * np.dot(up, forward))
        program["u_key_dir"] = _unit(-forward + 0.55 * up - 0.55 * right)  # above left of the camera
        program["u_fill_dir"] = _unit(-forward - 0.15 * up + 0.8 * right)
        program["u_rim_dir"] = _unit(forward + 0.6 * up + 0.3 * right)  # behind, above

    def _prepare_transforms(self, view) -> None:
        view.view_program.vert["transform"] = view.get_transform()

    def _compute_bounds(self, axis: int, view) -> tuple[float, float] | None:
        if self.mesh is None:
            return None
        column = self.mesh.rest[:, axis]
        return float(column.min()), float(column.max())


def _transform_signature(transform):
    """A comparable value that changes whenever the transform does; None where it cannot tell."""
    if isinstance(transform, ChainTransform):
        parts = tuple(_transform_signature(t) for t in transform.transforms)
        return None if None in parts else parts
    if isinstance(transform, InverseTransform):
        inner = _transform_signature(transform._inverse)
        return None if inner is None else ("inverse", inner)
    if isinstance(transform, NullTransform):
        return "null"
    if isinstance(transform, MatrixTransform):
        return transform.matrix.tobytes()
    if isinstance(transform, STTransform):
        return transform.scale.tobytes() + transform.translate.tobytes()
    return None


def _unit(vector: np.ndarray) -> np.ndarray:
    return (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)


def _closest_point(origin_a: np.ndarray, dir_a: np.ndarray, origin_b: np.ndarray, dir_b: np.ndarray) -> np.ndarray:
    """Where two camera rays meet: the eye, for a perspective camera (far along the axis for orthographic)."""
    cross = np.cross(dir_a, dir_b)
    denom = float(np.dot(cross, cross))
    if denom < 1e-12:
        return (origin_a - dir_a * 1e3).astype(np.float32)
    t = np.dot(np.cross(origin_b - origin_a, dir_b), cross) / denom
    return (origin_a + t * dir_a).astype(np.float32)


Avatar = create_visual_node(AvatarVisual)
