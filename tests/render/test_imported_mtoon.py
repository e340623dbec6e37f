"""MToon rim light and outline, and alpha-blended primitives, as imported glTF/VRM materials ask for them."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from render.offscreen import OffscreenRenderer
from studio.avatar.io import load_avatar
from studio.frame import FrameState

SPHERE_CENTRE = (0.0, 1.5, 0.0)
SPHERE_RADIUS = 0.15


def sphere(centre=SPHERE_CENTRE, radius=SPHERE_RADIUS, rings=32, segments=48):
    """Positions, normals and outward-wound triangles of a UV sphere (its seam and poles split, as exporters write)."""
    theta = np.linspace(0, np.pi, rings + 1)[:, None]
    phi = np.linspace(0, 2 * np.pi, segments + 1)[None, :]
    points = np.stack([np.sin(theta) * np.cos(phi), np.cos(theta) + 0 * phi, np.sin(theta) * np.sin(phi)], -1)
    normals = points.reshape(-1, 3)
    grid = np.arange((rings + 1) * (segments + 1)).reshape(rings + 1, segments + 1)
    a, b, c, d = grid[:-1, :-1], grid[:-1, 1:], grid[1:, :-1], grid[1:, 1:]
    triangles = np.concatenate([np.stack([a, b, c], -1), np.stack([b, d, c], -1)]).reshape(-1, 3)
    return radius * normals + centre, normals, triangles


def quad(z: float, size: float = 0.3, centre_y: float = 1.5):
    """A square facing +Z (towards the camera) at depth z."""
    h = size / 2
    positions = np.array([[-h, centre_y - h, z], [h, centre_y - h, z], [h, centre_y + h, z], [-h, centre_y + h, z]])
    return positions, np.tile([0.0, 0.0, 1.0], (4, 1)), np.array([[0, 1, 2], [0, 2, 3]])


def write_glb(path: Path, pieces: list[tuple], materials: list[dict]) -> Path:
    """A GLB with one mesh of these primitives: (positions, normals, triangles, material index) each."""
    blob, views, accessors, primitives = b"", [], [], []

    def add(array: np.ndarray, kind: str, component: int) -> int:
        nonlocal blob
        data = array.tobytes()
        views.append({"buffer": 0, "byteOffset": len(blob), "byteLength": len(data)})
        blob += data + b"\0" * (-len(data) % 4)
        accessor = {"bufferView": len(views) - 1, "componentType": component, "count": len(array), "type": kind}
        if kind == "VEC3":
            accessor.update(min=array.min(axis=0).tolist(), max=array.max(axis=0).tolist())
        accessors.append(accessor)
        return len(accessors) - 1

    for positions, normals, triangles, material in pieces:
        primitives.append({
            "attributes": {"POSITION": add(np.asarray(positions, np.float32), "VEC3", 5126),
                           "NORMAL": add(np.asarray(normals, np.float32), "VEC3", 5126)},
            "indices": add(np.asarray(triangles, np.uint32).reshape(-1), "SCALAR", 5125),
            "material": material,
        })
    document = {
        "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0]}], "nodes": [{"mesh": 0}],
        "meshes": [{"primitives": primitives}], "materials": materials,
        "buffers": [{"byteLength": len(blob)}], "bufferViews": views, "accessors": accessors,
    }
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    body = struct.pack("<I4s", len(text), b"JSON") + text + struct.pack("<I4s", len(blob), b"BIN\0") + blob
    path.write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body)
    return path


def mtoon(**factors) -> dict:
    """A grey MToon material (shade colour the base colour's, so the two tones are one) with these MToon factors."""
    grey = [0.1, 0.1, 0.1]
    return {"pbrMetallicRoughness": {"baseColorFactor": [*grey, 1.0]},
            "extensions": {"VRMC_materials_mtoon": {"specVersion": "1.0", "shadeColorFactor": grey, **factors}}}


def render(path: Path, size=(200, 200)) -> np.ndarray:
    with OffscreenRenderer(load_avatar(path), size=size, background="transparent") as renderer:
        return renderer.render(FrameState()).astype(int)


def sphere_render(tmp_path: Path, name: str, **factors) -> np.ndarray:
    return render(write_glb(tmp_path / f"{name}.glb", [(*sphere(), 0)], [mtoon(**factors)]))


def test_rim_light_brightens_the_silhouette_edge_and_not_the_middle(tmp_path):
    plain = sphere_render(tmp_path, "plain")
    rim = sphere_render(tmp_path, "rim", parametricRimColorFactor=[1.0, 0.9, 0.2], parametricRimFresnelPowerFactor=3.0)
    covered = plain[..., 3] > 250
    assert np.array_equal(covered, rim[..., 3] > 250)  # the rim lights the surface; it does not grow it
    rows, cols = np.nonzero(covered)
    centre = np.array([rows.mean(), cols.mean()])
    radius = np.hypot(rows - centre[0], cols - centre[1]).max()
    distance = np.hypot(*(np.indices(covered.shape) - centre[:, None, None]))
    edge = covered & (distance > 0.85 * radius)
    middle = covered & (distance < 0.4 * radius)
    gain = rim[..., :3].sum(axis=-1) - plain[..., :3].sum(axis=-1)
    assert gain[edge].mean() > 150  # the edge turns bright yellow ...
    assert np.abs(gain[middle]).mean() < 10  # ... where the surface faces the eye there is hardly any rim
    red_gain, blue_gain = (rim[edge][:, c] - plain[edge][:, c] for c in (0, 2))
    assert red_gain.mean() > 2 * blue_gain.mean()  # in the rim's colour


def outline_pixels(image: np.ndarray) -> np.ndarray:
    """Pixels of the pure green outline colour (lighting mix 0: drawn as it is)."""
    r, g, b, a = np.moveaxis(image, -1, 0)
    return (g > 230) & (r < 25) & (b < 25) & (a > 250)


@pytest.mark.parametrize("mode, width", [("worldCoordinates", 0.006), ("screenCoordinates", 0.015)])
def test_outline_rings_the_silhouette_only_when_the_material_asks(tmp_path, mode, width):
    """A 6 mm outline around a 15 cm sphere 91 px wide is about 3.6 px wide here; 1.5 % of 200 px is 3 px."""
    green = {"outlineColorFactor": [0.0, 1.0, 0.0], "outlineLightingMixFactor": 0.0}
    plain = sphere_render(tmp_path, "plain", **green)
    off = sphere_render(tmp_path, "off", outlineWidthMode="none", outlineWidthFactor=width, **green)
    lined = sphere_render(tmp_path, "lined", outlineWidthMode=mode, outlineWidthFactor=width, **green)
    assert outline_pixels(plain).sum() == 0 and np.array_equal(off, plain)
    ring = outline_pixels(lined)
    body = plain[..., 3] > 250
    assert ring.sum() > 200
    assert not (ring & body).any()  # the sphere itself keeps its colour: the hull shows only outside it
    rows, cols = np.nonzero(body)
    centre = np.array([rows.mean(), cols.mean()])
    radius = np.hypot(rows - centre[0], cols - centre[1]).max()
    ring_distance = np.hypot(*(np.argwhere(ring) - centre).T)
    assert ring_distance.min() > radius - 2 and ring_distance.max() < radius + 6  # a thin band all around
    angles = np.arctan2(*(np.argwhere(ring) - centre).T)
    assert np.histogram(angles, bins=8, range=(-np.pi, np.pi))[0].min() > 10


def flat(color: tuple[float, float, float], alpha: float = 1.0, mode: str = "OPAQUE") -> dict:
    return {"pbrMetallicRoughness": {"baseColorFactor": [*color, alpha]}, "alphaMode": mode,
            "extensions": {"KHR_materials_unlit": {}}}


def centre_pixel(image: np.ndarray) -> np.ndarray:
    height, width = image.shape[:2]
    return image[height // 2 - 2:height // 2 + 3, width // 2 - 2:width // 2 + 3, :3].reshape(-1, 3).mean(axis=0)


def test_a_blended_primitive_shows_what_is_behind_it_whatever_the_file_order(tmp_path):
    """Unlit squares, nearest first in the file: red at 50 % in front of green at 50 % in front of opaque blue.
    Drawn after the opaque blue and farthest first, the middle is 1/2 red, 1/4 green and 1/4 blue (mixed as display
    values, as the framebuffer holds them); drawn as a mask it would be red, and in file order green would sit over
    the red."""
    materials = [flat((1, 0, 0), 0.5, "BLEND"), flat((0, 1, 0), 0.5, "BLEND"), flat((0, 0, 1))]
    pieces = [(*quad(0.0, 0.2), 0), (*quad(-0.1, 0.3), 1), (*quad(-0.2, 0.4), 2)]
    image = render(write_glb(tmp_path / "layers.glb", pieces, materials))
    assert np.allclose(centre_pixel(image) / 255, (0.5, 0.25, 0.25), atol=0.03), centre_pixel(image)
    behind = render(write_glb(tmp_path / "single.glb", [(*quad(0.0, 0.2), 0), (*quad(-0.2, 0.4), 1)],
                              [flat((1, 0, 0), 0.5, "BLEND"), flat((0, 0, 1))]))
    assert np.allclose(centre_pixel(behind) / 255, (0.5, 0.0, 0.5), atol=0.03), centre_pixel(behind)


def test_a_blended_primitive_over_a_transparent_background_keeps_its_colour_with_its_alpha(tmp_path):
    """Exports with alpha (ProRes 4444, VP9) take colour and alpha apart: half-transparent red is red at alpha 128,
    not the dark red (128, 0, 0) that the framebuffer holds after blending over nothing."""
    image = render(write_glb(tmp_path / "alone.glb", [(*quad(0.0, 0.3), 0)], [flat((1, 0, 0), 0.5, "BLEND")]))
    centre = image[95:105, 95:105].reshape(-1, 4)
    assert np.abs(centre - (255, 0, 0, 128)).max() <= 2, centre[0]


def blended_mtoon(color: tuple[float, float, float], queue: int, depth_write: bool = False) -> dict:
    """A flat MToon material (shade colour = base colour) at 50 % alpha, blended, with this render queue offset."""
    return {"pbrMetallicRoughness": {"baseColorFactor": [*color, 0.5]}, "alphaMode": "BLEND",
            "extensions": {"VRMC_materials_mtoon": {"specVersion": "1.0", "shadeColorFactor": list(color),
                                                    "renderQueueOffsetNumber": queue,
                                                    "transparentWithZWrite": depth_write}}}


@pytest.mark.parametrize("depth_write, expected", [(False, (0.25, 0.5, 0.25)), (True, (0.5, 0.0, 0.5))])
def test_the_render_queue_orders_blended_primitives_before_depth_and_zwrite_hides_what_is_behind(
        tmp_path, depth_write, expected):
    """Red at 50 % in front of green at 50 % in front of opaque blue, but green's queue is later: green is drawn over
    the red (1/2 green over 1/2 red over blue). With transparentWithZWrite the red writes depth, so the green behind
    it is hidden (1/2 red over blue)."""
    materials = [blended_mtoon((1, 0, 0), 0, depth_write), blended_mtoon((0, 1, 0), 1), flat((0, 0, 1))]
    pieces = [(*quad(0.0, 0.2), 0), (*quad(-0.1, 0.3), 1), (*quad(-0.2, 0.4), 2)]
    image = render(write_glb(tmp_path / "queued.glb", pieces, materials))
    assert np.allclose(centre_pixel(image) / 255, expected, atol=0.03), centre_pixel(image)


def test_mtoon_rim_and_outline_are_read_from_vrm0_material_properties(tmp_path):
    """VRM 0.x keeps MToon in VRM.materialProperties, colours in gamma space and the outline width in centimetres."""
    from studio.avatar.gltf import read_gltf

    path = write_glb(tmp_path / "vrm0.glb", [(*sphere(), 0)], [{"name": "Body"}])
    data = path.read_bytes()
    length = struct.unpack("<I", data[12:16])[0]
    document = json.loads(data[20:20 + length])
    document["extensions"] = {"VRM": {"materialProperties": [{
        "name": "Body", "shader": "VRM/MToon",
        "floatProperties": {"_RimFresnelPower": 4.0, "_RimLift": 0.1, "_OutlineWidthMode": 1, "_OutlineWidth": 0.5,
                            "_OutlineColorMode": 0, "_OutlineLightingMix": 0.7},
        "vectorProperties": {"_RimColor": [0.5, 0.5, 0.5, 1.0], "_OutlineColor": [1.0, 0.0, 0.0, 1.0]},
    }]}}
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    body = struct.pack("<I4s", len(text), b"JSON") + text + data[20 + length:]
    path.write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body)
    material = read_gltf(path).materials[0]
    assert material.rim.color == pytest.approx((0.5 ** 2.2,) * 3) and material.rim.fresnel_power == 4.0
    assert material.rim.lift == pytest.approx(0.1)
    assert (material.outline.mode, material.outline.width) == ("world", pytest.approx(0.005))
    assert material.outline.color == (1.0, 0.0, 0.0) and material.outline.lighting_mix == 0.0  # fixed colour mode
    model = load_avatar(path)
    assert model.outline is not None and model.rim is not None


def test_a_malformed_mtoon_factor_leaves_a_note_and_no_outline(tmp_path):
    path = write_glb(tmp_path / "bad.glb", [(*sphere(), 0)],
                     [mtoon(outlineWidthMode="worldCoordinates", outlineWidthFactor="wide")])
    model = load_avatar(path)
    assert model.outline is None
    assert any("outlineWidthFactor is 'wide'" in note for note in model.info["notes"])


def test_an_absurdly_wide_outline_is_drawn_5_cm_wide_with_a_note(tmp_path):
    """A 1 km outline would cover the whole frame in its colour; it is drawn at the 5 cm limit and the user told."""
    path = write_glb(tmp_path / "wide.glb", [(*sphere(), 0)],
                     [mtoon(outlineWidthMode="worldCoordinates", outlineWidthFactor=1000.0,
                            outlineColorFactor=[0.0, 1.0, 0.0], outlineLightingMixFactor=0.0)])
    model = load_avatar(path)
    assert any("1000m wide: drawn 0.05m wide" in note for note in model.info["notes"])
    ring = outline_pixels(render(path))
    assert 0 < ring.sum() < 0.5 * ring.size


def test_a_closed_sphere_split_along_its_seam_is_drawn_with_back_faces_culled(tmp_path):
    """Exporters split vertices along UV seams and at the poles; the surface is still closed, so it is culled (a
    quarter of the software rasteriser's time), not drawn from both sides as an open sheet would be."""
    from render.avatar_visual import AvatarMesh

    mesh = AvatarMesh(load_avatar(write_glb(tmp_path / "seamed.glb", [(*sphere(), 0)], [mtoon()])))
    assert not mesh.two_sided.any()


def test_the_imported_avatar_bench_reports_the_ratio_to_the_default_avatar_and_the_extra_passes(tmp_path):
    from render.bench import bench_imported_avatar

    green = {"outlineColorFactor": [0.0, 1.0, 0.0], "outlineWidthMode": "worldCoordinates", "outlineWidthFactor": 0.01}
    pieces = [(*sphere(), 0), (*quad(0.2), 1)]
    path = write_glb(tmp_path / "bench.glb", pieces, [mtoon(**green), flat((1, 0, 0), 0.5, "BLEND")])
    report = bench_imported_avatar(path, frames=2)
    assert report["outline_triangles"] == len(sphere()[2]) and report["blended_primitives"] == 1
    assert report["render_fps_vs_default_avatar_pct"] == pytest.approx(
        100 * report["render_1280x720_fps"] / report["default_avatar_render_1280x720_fps"], abs=0.2)


@pytest.mark.parametrize("name", ["addon_vrm1.vrm", "addon_vrm0.vrm"])
def test_the_vrm_addon_files_draw_their_cloth_outline_and_skin_rim(name):
    """The VRM Add-on for Blender wrote these (VRM 1.0 and 0.x): a 4 mm dark outline on the cloth, a warm rim on the
    skin. Against the same avatar with each left out, the outline adds dark pixels just outside the body and the rim
    brightens the skin's edge."""
    import dataclasses

    model = load_avatar(Path(__file__).resolve().parents[1] / "data" / "avatars" / name)
    assert model.outline is not None and model.rim is not None

    def drawn(avatar, camera):
        with OffscreenRenderer(avatar, size=(320, 320), background="transparent", camera=camera) as renderer:
            return renderer.render(FrameState()).astype(int)

    lined, unlined = drawn(model, "body"), drawn(dataclasses.replace(model, outline=None), "body")
    ring = (lined[..., 3] > 250) & (unlined[..., 3] < 5)  # covered only with the outline
    assert ring.sum() > 150 and lined[ring][:, :3].max(axis=1).mean() < 60
    rim, plain = drawn(model, "head"), drawn(dataclasses.replace(model, rim=None), "head")
    gain = rim[..., :3].sum(axis=-1) - plain[..., :3].sum(axis=-1)
    assert (gain > 30).sum() > 200 and (gain < -5).sum() == 0


def test_mtoon_uv_animation_scrolls_and_turns_the_vrm_samples_textures_with_the_media_time():
    """The VRM specification's UV animation sample: a quarter second on, the left arrow's texture has moved a quarter
    of its quad to the left (wrapping round), the up arrow's a quarter up; a quarter turn on (π/2 s), the circular
    arrow is the first one turned by 90°. Every later frame of the same time is the same."""
    model = load_avatar(Path(__file__).resolve().parents[1] / "data" / "avatars" / "VRMC_materials_mtoon_UV_Animation_Test.vrm")
    with OffscreenRenderer(model, size=(300, 300), background="transparent") as renderer:
        frames = {t: renderer.render(FrameState(media_time_s=t)).astype(int) for t in (0.0, 0.25, np.pi / 2)}
        again = renderer.render(FrameState(media_time_s=0.25)).astype(int)
    assert np.array_equal(again, frames[0.25])
    covered = frames[0.0][..., 3] > 250
    rows = np.flatnonzero(covered.any(axis=1))
    quads = np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1)  # top to bottom: turning, scrolling y, scrolling x
    assert len(quads) == 3
    cols = np.flatnonzero(covered[quads[0]].any(axis=0))

    def tile(t: float, quad: np.ndarray) -> np.ndarray:
        inner = frames[t][quad[2]:quad[-2], cols[2]:cols[-2], :3].mean(axis=-1)  # inside the quad's edge
        return (inner < 100).astype(int)  # the black arrow

    def mismatch(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.abs(a - b).mean())

    def shift(still: np.ndarray, moved: np.ndarray, axis: int) -> int:
        """How far (pixels, + right or down) the arrow moved: the shift that best overlays the two."""
        def cost(k: int) -> float:
            a, b = np.moveaxis(still, axis, 0), np.moveaxis(moved, axis, 0)
            return mismatch(a[:len(a) - k], b[k:]) if k >= 0 else mismatch(a[-k:], b[:len(b) + k])
        return min(range(-len(still) // 2, len(still) // 2), key=cost)

    turning, scrolling_y, scrolling_x = quads
    still_x, moved_x = tile(0.0, scrolling_x), tile(0.25, scrolling_x)
    assert abs(shift(still_x, moved_x, axis=1) + (cols[-1] - cols[0]) / 4) <= 2  # a quarter of the quad, leftwards
    still_y, moved_y = tile(0.0, scrolling_y), tile(0.25, scrolling_y)
    assert abs(shift(still_y, moved_y, axis=0) + (scrolling_y[-1] - scrolling_y[0]) / 4) <= 2  # a quarter, upwards
    still, turned = tile(0.0, turning), tile(np.pi / 2, turning)
    size = min(still.shape)
    still, turned = still[:size, :size], turned[:size, :size]
    best = min(mismatch(np.rot90(still, k), turned) for k in (1, 3))
    assert best < 0.04 < mismatch(still, turned)
