"""The avatar viewport: one view on a caller's SceneCanvas, a turntable camera, and the backgrounds.

The canvas comes from the caller (the Qt window passes app='pyside6', offscreen export app='egl'), so the
same AvatarView draws on screen and into files.
"""

from __future__ import annotations

import numpy as np
from vispy import scene
from vispy.visuals import Visual

from render.avatar_visual import Avatar, AvatarMesh
from studio.avatar.model import AvatarModel
from studio.avatar.skeleton import JOINT_INDEX
from studio.frame import FrameState

_HEAD_JOINTS = tuple(JOINT_INDEX[name] for name in ("head", "jaw", "left_eye_smplhf", "right_eye_smplhf"))

BACKGROUNDS = ("studio", "chroma", "transparent")
CHROMA_GREEN = (0.0, 177 / 255, 64 / 255, 1.0)  # #00B140
CAMERA_FRAMINGS = ("body", "head")
_FRONT_AZIMUTH = 90.0  # turntable azimuth that puts the camera in front of a +z-facing avatar
_FOV_DEG = 25.0
_DEPTH_RANGE = 400.0  # far/near clip ratio: vispy's default 1e6 leaves 16-bit depth buffers z-fighting

_GRADIENT_VERTEX = """
attribute vec2 a_corner;
varying vec2 v_uv;
void main() {
    v_uv = a_corner * 0.5 + 0.5;
    gl_Position = vec4(a_corner, 0.0, 1.0);
}
"""

_GRADIENT_FRAGMENT = """
varying vec2 v_uv;
uniform vec3 u_top;
uniform vec3 u_bottom;
void main() {
    vec3 color = mix(u_bottom, u_top, smoothstep(0.0, 1.0, v_uv.y));
    vec2 d = v_uv - vec2(0.5, 0.55);
    color *= 1.0 - 0.35 * dot(d, d);  // gentle vignette
    gl_FragColor = vec4(color, 1.0);
}
"""

_SHADOW_VERTEX = """
attribute vec2 a_corner;
uniform vec3 u_center;
uniform vec2 u_radius;
varying vec2 v_local;
void main() {
    v_local = a_corner;
    gl_Position = $transform(vec4(u_center + vec3(a_corner.x * u_radius.x, 0.0, a_corner.y * u_radius.y), 1.0));
}
"""

_SHADOW_FRAGMENT = """
varying vec2 v_local;
void main() {
    float r2 = dot(v_local, v_local);
    gl_FragColor = vec4(0.0, 0.0, 0.0, 0.38 * (1.0 - smoothstep(0.0, 1.0, r2)));
}
"""

_QUAD = np.array([[-1, -1], [1, -1], [-1, 1], [1, 1]], np.float32)


class _GradientVisual(Visual):
    """A full-screen vertical gradient drawn behind everything, without depth."""

    def __init__(self) -> None:
        Visual.__init__(self, vcode=_GRADIENT_VERTEX, fcode=_GRADIENT_FRAGMENT)
        self.shared_program["a_corner"] = _QUAD
        self.shared_program["u_top"] = (0.50, 0.53, 0.58)
        self.shared_program["u_bottom"] = (0.20, 0.21, 0.24)
        self.set_gl_state(depth_test=False, blend=False)
        self._draw_mode = "triangle_strip"

    def _prepare_transforms(self, view) -> None:
        return None

    def _compute_bounds(self, axis: int, view):
        return None


class _FloorShadowVisual(Visual):
    """A soft dark ellipse on the floor under the avatar's root."""

    def __init__(self) -> None:
        Visual.__init__(self, vcode=_SHADOW_VERTEX, fcode=_SHADOW_FRAGMENT)
        self.shared_program["a_corner"] = _QUAD
        self.shared_program["u_center"] = (0.0, 0.002, 0.0)
        self.shared_program["u_radius"] = (0.42, 0.3)
        self.set_gl_state("translucent", depth_test=False)
        self._draw_mode = "triangle_strip"

    def set_center(self, x: float, z: float) -> None:
        self.shared_program["u_center"] = (x, 0.002, z)

    def _prepare_transforms(self, view) -> None:
        view.view_program.vert["transform"] = view.get_transform()

    def _compute_bounds(self, axis: int, view):
        return None


class ZoomToCursorCamera(scene.TurntableCamera):
    """A turntable camera whose mouse wheel zooms toward the point under the cursor.

    vispy's own wheel zoom scales about the camera centre, which for the whole body is the hips:
    zooming in on the face then pushed the face out of the top of the view.
    """

    def viewbox_mouse_event(self, event) -> None:
        if event.type == "mouse_wheel" and event.pos is not None:
            self.zoom_about(1.1 ** -event.delta[1], event.pos[:2])
            event.handled = True
            return
        super().viewbox_mouse_event(event)

    def zoom_about(self, factor: float, viewbox_pos) -> None:
        """Scale the view by `factor` (< 1 zooms in) keeping the scene point under `viewbox_pos` where it is."""
        anchor = self.point_under(viewbox_pos)
        center = np.asarray(self.center, np.float64)
        self.scale_factor = self.scale_factor * float(factor)
        self.center = tuple(anchor + (center - anchor) * float(factor))

    def point_under(self, viewbox_pos) -> np.ndarray:
        """The scene point under a viewbox pixel, on the plane through the centre facing the camera."""
        transform = self._viewbox.scene.transform
        depth = transform.map(np.append(np.asarray(self.center, np.float64), 1.0))
        pixel = np.array([viewbox_pos[0], viewbox_pos[1], depth[2] / depth[3], 1.0])
        point = transform.imap(pixel)
        return point[:3] / point[3]


_Gradient = scene.visuals.create_visual_node(_GradientVisual)
_FloorShadow = scene.visuals.create_visual_node(_FloorShadowVisual)


class AvatarView:
    """The avatar on a SceneCanvas, with camera framing and backgrounds."""

    def __init__(
        self,
        canvas: scene.SceneCanvas,
        avatar: AvatarModel | None = None,
        background: str = "studio",
        camera: str = "body",
        skinning: str = "gpu",
    ) -> None:
        self.canvas = canvas
        self.view = canvas.central_widget.add_view()
        self.view.camera = ZoomToCursorCamera(
            up="+y", fov=_FOV_DEG, azimuth=_FRONT_AZIMUTH, elevation=0.0, distance=None
        )
        self.view.camera.depth_value = _DEPTH_RANGE
        self.gradient = _Gradient(parent=self.view.scene)
        self.gradient.order = -20
        self.shadow = _FloorShadow(parent=self.view.scene)
        self.shadow.order = -10
        self.avatar = Avatar(skinning=skinning, parent=self.view.scene)
        self.background = ""
        self.framing = camera
        self._state = FrameState()
        self._cpu_mesh: AvatarMesh | None = None
        self._zoom_target: np.ndarray | None = None
        self.set_background(background)
        if avatar is not None:
            self.set_avatar(avatar)
        self._frame(camera)

    @property
    def camera(self) -> ZoomToCursorCamera:
        return self.view.camera

    def set_avatar(self, model: AvatarModel, betas: np.ndarray | None = None, mesh: AvatarMesh | None = None) -> None:
        """Draw this model (a `studio.avatar.look.drawn_model`; `betas` shapes a bare one) and frame it anew."""
        if mesh is None:
            mesh = AvatarMesh(model, betas)
        self.set_lod(mesh.model, mesh, reframe=True)

    def set_frame(self, state: FrameState) -> None:
        """Show this FrameState at the next draw; cheap enough to call at display rate."""
        self._state = state
        self.avatar.set_state(state)
        if self.background == "studio":
            self.shadow.set_center(float(state.transl[0]), float(state.transl[2]))

    def set_lod(self, model: AvatarModel, mesh: AvatarMesh, reframe: bool = False) -> None:
        """Draw another level of detail or look of the same avatar. Camera and background stay; `reframe`
        (for a new body shape, whose head may now be out of view) frames the avatar anew as it was framed."""
        self.avatar.set_avatar(model, mesh=mesh)
        self.avatar.set_state(self._state)
        self._cpu_mesh = None
        if reframe:
            self._head_box = _head_box(model)
            self._vertical_range = (float(model.v_template[:, 1].min()), float(model.v_template[:, 1].max()))
            self._frame(self.framing)
        self.canvas.update()

    def set_cloth(self, regions: tuple[str, ...]) -> None:
        """Which cloth springs run (studio.precision's cloth level)."""
        self.avatar.set_cloth(regions)

    def set_background(self, mode: str) -> None:
        if mode not in BACKGROUNDS:
            raise ValueError(f"background {mode!r} is not known; allowed: {', '.join(BACKGROUNDS)}")
        self.background = mode
        self.gradient.visible = mode == "studio"
        self.shadow.visible = mode == "studio"
        if mode == "chroma":
            self.canvas.bgcolor = CHROMA_GREEN
        elif mode == "transparent":
            self.canvas.bgcolor = (0.0, 0.0, 0.0, 0.0)
        else:
            self.canvas.bgcolor = (0.2, 0.21, 0.24, 1.0)
        self.canvas.update()

    def frame_head(self) -> None:
        """Put the head in the middle of the view, filling most of its height."""
        self._frame("head")

    def frame_body(self) -> None:
        """Show the whole avatar, feet to hair."""
        self._frame("body")

    def _frame(self, framing: str) -> None:
        if framing not in CAMERA_FRAMINGS:
            raise ValueError(f"camera framing {framing!r} is not known; allowed: {', '.join(CAMERA_FRAMINGS)}")
        self.framing = framing
        if self.avatar.mesh is None:
            return
        camera = self.camera
        camera.azimuth = _FRONT_AZIMUTH
        camera.elevation = 0.0
        low, high = self._head_box
        self._zoom_target = (low + high) / 2  # the face: what a zoom without a cursor closes in on
        if framing == "head":
            camera.center = tuple(float(v) for v in self._zoom_target)
            camera.scale_factor = float(high[1] - low[1]) * 1.45
        else:
            low, high = self._vertical_range
            camera.center = (0.0, (low + high) / 2, 0.0)
            camera.scale_factor = (high - low) * 1.12
        self.canvas.update()

    def orbit(self, azimuth_deg: float, elevation_deg: float = 0.0) -> None:
        """Turn the camera around the avatar by these angles (degrees)."""
        self.camera.orbit(azimuth_deg, elevation_deg)

    def zoom(self, factor: float, canvas_pos: tuple[float, float] | None = None) -> None:
        """Zoom in (factor < 1) or out (factor > 1) toward the canvas pixel `canvas_pos`, or else toward the face."""
        camera = self.camera
        if canvas_pos is not None:
            offset = self.view.pos
            camera.zoom_about(factor, (canvas_pos[0] - offset[0], canvas_pos[1] - offset[1]))
            return
        target = self._zoom_target
        center = np.asarray(camera.center, np.float64)
        camera.scale_factor = camera.scale_factor * float(factor)
        if target is not None:
            camera.center = tuple(target + (center - target) * float(factor))

    def project(self, points: np.ndarray) -> np.ndarray:
        """Canvas pixel coordinates (N, 2), x right and y down, of avatar-space points (N, 3)."""
        transform = self.avatar.get_transform("visual", "canvas")
        mapped = transform.map(np.asarray(points, np.float64))
        return mapped[:, :2] / mapped[:, 3:4]

    def posed_vertices(self, state: FrameState | None = None) -> np.ndarray:
        """Vertices (V, 3) as drawn for this state (the current one by default), computed on the CPU."""
        mesh = self.avatar.mesh
        if mesh is None:
            raise RuntimeError("AvatarView has no avatar yet; call set_avatar first")
        if not self.avatar.visible:  # never drawn (a part-ID render): its own mesh is free to pose, no copy needed
            return mesh.posed_vertices(state or self._state)
        if self._cpu_mesh is None:
            self._cpu_mesh = AvatarMesh(mesh.model)
        return self._cpu_mesh.posed_vertices(state or self._state)


def _head_box(model: AvatarModel) -> tuple[np.ndarray, np.ndarray]:
    """Rest-pose bounding box (low, high corners) of the vertices the head joints mostly carry."""
    head = model.skin_weights[:, list(_HEAD_JOINTS)].sum(axis=1) > 0.5
    points = model.v_template[head] if head.any() else model.v_template
    if np.ptp(points[:, 1]) < 1e-6:  # no head bone (an imported avatar): only its joints' points, all in one place
        points = model.v_template
    return points.min(axis=0).astype(np.float64), points.max(axis=0).astype(np.float64)
