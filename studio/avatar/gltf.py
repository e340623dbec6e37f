"""Reading `.glb`, `.gltf` and `.vrm` files into checked numpy arrays (no Qt, no GL).

pygltflib parses the container and the JSON; everything read from the buffers goes through `_Reader`, which
checks every accessor against its buffer view and buffer before it touches a byte, so a hostile file is refused
with the file name and the reason (`AvatarFormatError`) instead of crashing, hanging or allocating what it claims.
Buffers and images are read from the GLB's binary chunk, `data:` URIs, or files inside the model's own folder;
nothing else (no network, no file outside the folder).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import struct
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from studio.avatar.model import AvatarFormatError

GLTF_SUFFIXES = (".glb", ".gltf", ".vrm")
MAX_FILE_BYTES = 512 << 20
MAX_VERTICES = 2_000_000  # over all primitives; a 60k-triangle VRM has ~40k
MAX_TRIANGLES = 4_000_000
MAX_NODES = 10_000
MAX_TEXTURE_PIXELS = 4096 * 4096
UNSUPPORTED_EXTENSIONS = {
    "KHR_draco_mesh_compression": "Draco mesh compression",
    "EXT_meshopt_compression": "meshopt compression",
    "KHR_meshopt_compression": "meshopt compression",
}  # KHR_mesh_quantization needs nothing: integer attributes are read as numbers, normalized ones scaled to 0..1
_COMPONENTS = {5120: np.int8, 5121: np.uint8, 5122: np.int16, 5123: np.uint16, 5125: np.uint32, 5126: np.float32}
_WIDTHS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}
_TRIANGLES = 4


@dataclass
class Primitive:
    """One drawable piece, in the file's rest pose and world space (skinned ones in their bind pose)."""

    node: int
    mesh: int
    positions: np.ndarray  # (N, 3) float32
    normals: np.ndarray | None
    uvs: np.ndarray | None  # (N, 2) float32, glTF convention (v down from the image's top row)
    colors: np.ndarray | None  # (N, 4) float32 linear
    joints: np.ndarray | None  # (N, 4) int: node indices (already resolved through the skin)
    weights: np.ndarray | None  # (N, 4) float32, rows sum to 1
    triangles: np.ndarray  # (M, 3) int64 into this primitive's vertices
    material: int | None
    targets: list[np.ndarray] = field(default_factory=list)  # (N, 3) world-space displacement per morph target
    target_names: list[str] = field(default_factory=list)


@dataclass
class MaterialInfo:
    name: str
    base_color: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)  # linear
    texture_image: int | None = None  # index into GltfScene.images
    uv_transform: np.ndarray | None = None  # (3, 3) KHR_texture_transform of the base colour texture
    alpha_mode: str = "OPAQUE"
    alpha_cutoff: float = 0.5
    double_sided: bool = False  # read for completeness: the renderer draws open sheets two-sided by their geometry
    unlit: bool = False  # KHR_materials_unlit
    toon: tuple[tuple[float, float, float], float, float] | None = None  # MToon: (shade colour linear, shift, toony)
    rim: MToonRim | None = None  # MToon parametric rim light, where its colour is not black
    outline: MToonOutline | None = None  # MToon outline, where its width mode is not "none" and its width above 0
    blend_queue: int = 0  # MToon's order among blended materials (1.0 renderQueueOffsetNumber, 0.x renderQueue)
    blend_depth_write: bool = False  # MToon transparentWithZWrite (0.x _ZWrite): a blended material writes depth
    uv_motion: tuple[float, float, float] | None = None  # MToon UV animation: scroll x, y (UV units/s), turn (rad/s)


MAX_OUTLINE_WIDTH = 0.05  # MToon outline width drawn at most: metres, or a share of the screen height


@dataclass(frozen=True)
class MToonRim:
    """MToon's parametric rim: `color · clamp(1 - N·V + lift)^fresnel_power`, times the light by `lighting_mix`."""

    color: tuple[float, float, float]  # linear
    fresnel_power: float = 1.0
    lift: float = 0.0
    lighting_mix: float = 0.0


@dataclass(frozen=True)
class MToonOutline:
    """MToon's outline: the surface's back faces pushed out along the normal, drawn in `color`.

    `mode` "world": `width` in metres; "screen": `width` as a share of the screen height.
    """

    mode: str
    width: float
    color: tuple[float, float, float]  # linear
    lighting_mix: float = 1.0


@dataclass
class GltfScene:
    """What the studio takes from a glTF file: node tree, primitives, materials, decoded images, raw extensions."""

    path: Path
    node_names: list[str]
    parents: list[int]  # -1 for roots
    world: np.ndarray  # (nodes, 4, 4) rest-pose world matrices
    primitives: list[Primitive]
    materials: list[MaterialInfo]
    images: dict[int, np.ndarray]  # image index -> (H, W, 4) uint8 RGBA (sRGB)
    extensions: dict
    notes: list[str]
    mesh_nodes: dict[int, list[int]]  # mesh index -> nodes that draw it


def _refuse(path: Path, reason: str) -> AvatarFormatError:
    return AvatarFormatError(f"{path}: {reason}")


def read_gltf(path: str | os.PathLike) -> GltfScene:
    """Parse and check a glTF/GLB/VRM file; AvatarFormatError names the file and the first problem found."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as error:
        raise _refuse(path, f"cannot be read ({error.strerror})") from None
    if size > MAX_FILE_BYTES:
        raise _refuse(path, f"is {size / 2**20:.0f} MB; the studio reads avatar files up to {MAX_FILE_BYTES >> 20} MB")
    data = path.read_bytes()
    try:
        return _Reader(path, data).scene()
    except AvatarFormatError:
        raise
    except RecursionError:
        raise _refuse(path, "nests its JSON too deeply") from None
    except MemoryError:
        raise _refuse(path, "needs more memory than is free to read") from None
    except Exception as error:  # noqa: BLE001 - a hostile file must be refused, whatever pygltflib trips on
        raise _refuse(path, f"is not a valid glTF file ({type(error).__name__}: {error})"[:400]) from None


class _Reader:
    def __init__(self, path: Path, data: bytes) -> None:
        self.path = path
        self.folder = path.resolve().parent
        self.data = data
        self.notes: list[str] = []
        self._buffers: dict[int, bytes] = {}

    def fail(self, reason: str) -> AvatarFormatError:
        return _refuse(self.path, reason)

    # container and JSON -------------------------------------------------------------------------------
    def _document(self):
        import pygltflib

        blob = None
        if self.data[:4] == b"glTF":
            if len(self.data) < 20:
                raise self.fail("is a truncated GLB (shorter than its 20-byte header)")
            _, length = struct.unpack("<II", self.data[4:12])
            if length > len(self.data):
                raise self.fail(f"is a truncated GLB: its header says {length} bytes, the file has {len(self.data)}")
            chunk_length, chunk_type = struct.unpack("<II", self.data[12:20])
            if chunk_type != 0x4E4F534A or 20 + chunk_length > length:
                raise self.fail("is not a valid GLB: its first chunk is not JSON or runs past the file's end")
            text = self.data[20:20 + chunk_length]
            rest = 20 + chunk_length + (-chunk_length % 4)
            if rest + 8 <= length:
                bin_length, bin_type = struct.unpack("<II", self.data[rest:rest + 8])
                if bin_type == 0x004E4942:
                    if rest + 8 + bin_length > length:
                        raise self.fail("is a truncated GLB: its binary chunk runs past the file's end")
                    blob = self.data[rest + 8:rest + 8 + bin_length]
        else:
            text = self.data
        try:
            raw = json.loads(text.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise self.fail(f"is not valid glTF JSON: not UTF-8 text ({error.reason} at byte {error.start})") from None
        except json.JSONDecodeError as error:
            raise self.fail(f"is not valid glTF JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("asset"), dict):
            raise self.fail("is not a glTF document: its JSON has no 'asset' object")
        version = str(raw["asset"].get("version", ""))
        if not version.startswith("2."):
            raise self.fail(f"is glTF version {version or '(none)'!r}; the studio reads glTF 2.x")
        for name in list(raw.get("extensionsRequired", [])) + list(raw.get("extensionsUsed", [])):
            if name in UNSUPPORTED_EXTENSIONS:
                raise self.fail(f"uses {UNSUPPORTED_EXTENSIONS[name]} ({name}), which the studio cannot decode; "
                                "export it uncompressed")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            document = pygltflib.GLTF2.from_json(json.dumps(raw), infer_missing=True)
        self.raw = raw
        self.blob = blob
        return document

    # buffers ------------------------------------------------------------------------------------------
    def _external(self, uri: str, what: str) -> bytes:
        if uri.startswith("data:"):
            header, _, payload = uri.partition(",")
            if not header.endswith(";base64"):
                raise self.fail(f"{what} has a data URI that is not base64")
            try:
                return base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                raise self.fail(f"{what} has a data URI whose base64 is damaged") from None
        from urllib.parse import unquote, urlparse

        parsed = urlparse(uri)
        if parsed.scheme or uri.startswith(("/", "\\")) or parsed.netloc:
            raise self.fail(f"{what} points at {uri[:80]!r}; the studio reads only files inside the model's folder "
                            "(no network, no absolute paths)")
        target = (self.folder / unquote(parsed.path)).resolve()
        if not target.is_relative_to(self.folder):
            raise self.fail(f"{what} points at {uri[:80]!r}, outside the model's folder; refused")
        if not target.is_file():
            raise self.fail(f"{what} points at {uri[:80]!r}, which does not exist beside the model")
        if target.stat().st_size > MAX_FILE_BYTES:
            raise self.fail(f"{what} ({uri[:80]!r}) is larger than {MAX_FILE_BYTES >> 20} MB")
        return target.read_bytes()

    def buffer(self, index: int) -> bytes:
        if index not in self._buffers:
            buffers = self.raw.get("buffers", [])
            if not 0 <= index < len(buffers):
                raise self.fail(f"refers to buffer {index}; the file has {len(buffers)}")
            spec = buffers[index]
            uri = spec.get("uri")
            data = self.blob if uri is None else self._external(str(uri), f"buffer {index}")
            if data is None:
                raise self.fail(f"buffer {index} has no URI and the file has no GLB binary chunk")
            length = int(spec.get("byteLength", 0))
            if length > len(data):
                raise self.fail(f"buffer {index} claims {length} bytes but holds {len(data)}")
            self._buffers[index] = data
        return self._buffers[index]

    def view_bytes(self, index: int) -> tuple[memoryview, int | None]:
        views = self.raw.get("bufferViews", [])
        if not isinstance(index, int) or not 0 <= index < len(views):
            raise self.fail(f"refers to bufferView {index}; the file has {len(views)}")
        view = views[index]
        data = self.buffer(int(view.get("buffer", -1)))
        offset, length = int(view.get("byteOffset", 0)), int(view.get("byteLength", -1))
        if offset < 0 or length < 0 or offset + length > len(data):
            raise self.fail(f"bufferView {index} (bytes {offset}..{offset + length}) runs past the end of its "
                            f"buffer ({len(data)} bytes)")
        if "extensions" in view:
            for name in view["extensions"]:
                if name in UNSUPPORTED_EXTENSIONS:
                    raise self.fail(f"bufferView {index} uses {UNSUPPORTED_EXTENSIONS[name]} ({name}), "
                                    "which the studio cannot decode")
        stride = view.get("byteStride")
        return memoryview(data)[offset:offset + length], (int(stride) if stride else None)

    def accessor(self, index, limit: int = MAX_VERTICES, what: str = "") -> np.ndarray:
        """(count, width) array of an accessor as stored (floats as float32, ints as their type), bounds-checked."""
        accessors = self.raw.get("accessors", [])
        if not isinstance(index, int) or not 0 <= index < len(accessors):
            raise self.fail(f"{what or 'a primitive'} refers to accessor {index}; the file has {len(accessors)}")
        spec = accessors[index]
        count = spec.get("count")
        if not isinstance(count, int) or count < 0:
            raise self.fail(f"accessor {index} has count {count!r}; expected a whole number ≥ 0")
        if count > limit:
            raise self.fail(f"accessor {index} claims {count} elements; the studio reads at most {limit} "
                            f"({what or 'per accessor'})")
        kind, component = spec.get("type"), spec.get("componentType")
        if kind not in _WIDTHS or component not in _COMPONENTS:
            raise self.fail(f"accessor {index} has type {kind!r}/componentType {component!r}; "
                            f"allowed types {', '.join(_WIDTHS)} and componentTypes {sorted(_COMPONENTS)}")
        dtype, width = np.dtype(_COMPONENTS[component]).newbyteorder("<"), _WIDTHS[kind]
        element = dtype.itemsize * width
        if spec.get("bufferView") is None:
            out = np.zeros((count, width), dtype)
        else:
            data, stride = self.view_bytes(spec["bufferView"])
            stride = stride or element
            offset = int(spec.get("byteOffset", 0))
            if stride < element or offset < 0:
                raise self.fail(f"accessor {index} has byteStride {stride} / byteOffset {offset} that cannot hold "
                                f"its {element}-byte elements")
            end = offset + (stride * (count - 1) + element if count else 0)
            if end > len(data):
                raise self.fail(f"accessor {index} ({count} × {kind}) runs past the end of bufferView "
                                f"{spec['bufferView']} ({end} > {len(data)} bytes)")
            out = np.ndarray((count, width), dtype, buffer=data, offset=offset, strides=(stride, dtype.itemsize)).copy()
        sparse = spec.get("sparse")
        if sparse:
            sparse_count = int(sparse.get("count", 0))
            if not 0 <= sparse_count <= count:
                raise self.fail(f"accessor {index} has {sparse_count} sparse values for {count} elements")
            rows = self._plain(sparse["indices"], sparse_count, 1, f"accessor {index}'s sparse indices").ravel()
            if rows.size and int(rows.max()) >= count:
                raise self.fail(f"accessor {index}'s sparse index {int(rows.max())} ≥ its count {count}")
            values = self._plain(dict(sparse["values"], componentType=component), sparse_count, width,
                                 f"accessor {index}'s sparse values")
            out = out.copy() if not out.flags.writeable else out
            out[rows.astype(np.int64)] = values
        if out.dtype.kind == "f":
            if not np.isfinite(out).all():
                raise self.fail(f"accessor {index}{f' ({what})' if what else ''} holds NaN or infinite values")
            out = out.astype(np.float32)
        elif spec.get("normalized"):
            out = out.astype(np.float32) / float(np.iinfo(out.dtype).max)
        return out

    def _plain(self, spec: dict, count: int, width: int, what: str) -> np.ndarray:
        component = spec.get("componentType")
        if component not in _COMPONENTS:
            raise self.fail(f"{what} have componentType {component!r}")
        dtype = np.dtype(_COMPONENTS[component]).newbyteorder("<")
        data, _ = self.view_bytes(spec.get("bufferView"))
        offset = int(spec.get("byteOffset", 0))
        size = dtype.itemsize * width * count
        if offset < 0 or offset + size > len(data):
            raise self.fail(f"{what} run past the end of their bufferView")
        return np.frombuffer(data, dtype, count * width, offset).reshape(count, width)

    # scene ----------------------------------------------------------------------------------------------
    def scene(self) -> GltfScene:
        document = self._document()
        nodes = document.nodes or []
        if len(nodes) > MAX_NODES:
            raise self.fail(f"has {len(nodes)} nodes; the studio reads at most {MAX_NODES}")
        parents = [-1] * len(nodes)
        for index, node in enumerate(nodes):
            for child in node.children or []:
                if not isinstance(child, int) or not 0 <= child < len(nodes) or child == index:
                    raise self.fail(f"node {index} has child {child!r}; allowed 0..{len(nodes) - 1}, not itself")
                if parents[child] != -1:
                    raise self.fail(f"node {child} has two parents ({parents[child]} and {index}); glTF nodes form a tree")
                parents[child] = index
        world = self._world_matrices(nodes, parents)
        if self.raw.get("extensions", {}).get("VRM") is not None:
            turn = np.diag([-1.0, 1.0, -1.0, 1.0])  # VRM 0.x faces -Z; the studio's avatars face +Z
            world = turn @ world
        materials = [self._material(i, m) for i, m in enumerate(document.materials or [])]
        mesh_nodes: dict[int, list[int]] = {}
        primitives: list[Primitive] = []
        vertices = triangles = 0
        for node_index, node in enumerate(nodes):
            if node.mesh is None:
                continue
            meshes = document.meshes or []
            if not isinstance(node.mesh, int) or not 0 <= node.mesh < len(meshes):
                raise self.fail(f"node {node_index} refers to mesh {node.mesh!r}; the file has {len(meshes)}")
            mesh_nodes.setdefault(node.mesh, []).append(node_index)
            skin = self._skin(document, node, node_index, world)
            for prim_index, primitive in enumerate(meshes[node.mesh].primitives or []):
                piece = self._primitive(document, node_index, node.mesh, prim_index, primitive, world, skin,
                                        MAX_VERTICES - vertices)
                if piece is None:
                    continue
                if piece.material is not None and not 0 <= piece.material < len(materials):
                    raise self.fail(f"mesh {node.mesh} primitive {prim_index} uses material {piece.material}; "
                                    f"the file has {len(materials)}")
                vertices += len(piece.positions)
                triangles += len(piece.triangles)
                if triangles > MAX_TRIANGLES:
                    raise self.fail(f"has more than {MAX_TRIANGLES} triangles; the studio draws at most that many")
                primitives.append(piece)
        if not primitives:
            raise self.fail("has no triangle meshes to draw")
        used = {m.texture_image for m in materials if m.texture_image is not None}
        decoded = {index: self._image(index) for index in sorted(used)}
        images = {index: pixels for index, pixels in decoded.items() if pixels is not None}
        return GltfScene(self.path, [n.name or f"node{i}" for i, n in enumerate(nodes)], parents, world, primitives,
                         materials, images, dict(self.raw.get("extensions") or {}), self.notes, mesh_nodes)

    def _world_matrices(self, nodes, parents: list[int]) -> np.ndarray:
        local = np.empty((len(nodes), 4, 4))
        for index, node in enumerate(nodes):
            if node.matrix is not None and len(node.matrix) == 16:
                local[index] = np.asarray(node.matrix, np.float64).reshape(4, 4).T  # column-major in the file
            else:
                local[index] = _trs(node.translation, node.rotation, node.scale)
            if not np.isfinite(local[index]).all():
                raise self.fail(f"node {index} has a NaN or infinite transform")
        world = np.empty_like(local)
        done = np.zeros(len(nodes), bool)
        for index in range(len(nodes)):
            chain = []
            at = index
            while at != -1 and not done[at]:
                chain.append(at)
                at = parents[at]
                if len(chain) > len(nodes):
                    raise self.fail(f"node {index}'s parents form a cycle")
            for node in reversed(chain):
                parent = parents[node]
                world[node] = local[node] if parent == -1 else world[parent] @ local[node]
                done[node] = True
        return world

    def _skin(self, document, node, node_index: int, world: np.ndarray):
        if node.skin is None:
            return None
        skins = document.skins or []
        if not isinstance(node.skin, int) or not 0 <= node.skin < len(skins):
            raise self.fail(f"node {node_index} refers to skin {node.skin!r}; the file has {len(skins)}")
        skin = skins[node.skin]
        joints = list(skin.joints or [])
        if not joints or any(not isinstance(j, int) or not 0 <= j < len(world) for j in joints):
            raise self.fail(f"skin {node.skin} lists joints outside 0..{len(world) - 1} (or none)")
        if skin.inverseBindMatrices is not None:
            inverse = self.accessor(skin.inverseBindMatrices, len(joints), f"skin {node.skin} inverse bind matrices")
            if inverse.shape != (len(joints), 16):
                raise self.fail(f"skin {node.skin} has {len(inverse)} inverse bind matrices for {len(joints)} joints")
            inverse = inverse.astype(np.float64).reshape(-1, 4, 4).transpose(0, 2, 1)
        else:
            inverse = np.repeat(np.eye(4)[None], len(joints), axis=0)
        return np.asarray(joints), world[joints] @ inverse  # joint node indices, rest skinning matrices

    def _primitive(self, document, node_index, mesh_index, prim_index, primitive, world, skin, budget):
        where = f"mesh {mesh_index} primitive {prim_index}"
        mode = primitive.mode if primitive.mode is not None else _TRIANGLES
        if primitive.extensions and "KHR_draco_mesh_compression" in primitive.extensions:
            raise self.fail(f"{where} uses Draco mesh compression (KHR_draco_mesh_compression), which the studio "
                            "cannot decode; export it uncompressed")
        if mode != _TRIANGLES:
            self.notes.append(f"{where} is drawn as mode {mode} (points, lines or strips): skipped")
            return None
        attributes = primitive.attributes
        if attributes.POSITION is None:
            raise self.fail(f"{where} has no POSITION attribute")
        positions = self.accessor(attributes.POSITION, budget, f"{where} POSITION").astype(np.float64)
        if positions.shape[1] != 3:
            raise self.fail(f"{where} POSITION is not VEC3")
        count = len(positions)

        def attribute(index, width, name):
            if index is None:
                return None
            values = self.accessor(index, count, f"{where} {name}")
            if values.shape != (count, width):
                raise self.fail(f"{where} {name} has {values.shape[0]} × {values.shape[1]} values for {count} vertices")
            return values

        if primitive.indices is not None:
            indices = self.accessor(primitive.indices, 3 * MAX_TRIANGLES, f"{where} indices").ravel()
            if indices.dtype.kind not in "iu":
                raise self.fail(f"{where} indices are floats; glTF indices are unsigned integers")
            indices = indices.astype(np.int64)
        else:
            indices = np.arange(count, dtype=np.int64)
        if indices.size % 3:
            raise self.fail(f"{where} has {indices.size} indices, not a whole number of triangles")
        if indices.size and (int(indices.max()) >= count or int(indices.min()) < 0):
            raise self.fail(f"{where} index {int(indices.max())} ≥ its vertex count {count}")
        normals = attribute(attributes.NORMAL, 3, "NORMAL")
        uvs = attribute(attributes.TEXCOORD_0, 2, "TEXCOORD_0")
        colors = None
        if attributes.COLOR_0 is not None:
            colors = self.accessor(attributes.COLOR_0, count, f"{where} COLOR_0")
            if colors.shape not in ((count, 3), (count, 4)) or colors.dtype.kind != "f":
                raise self.fail(f"{where} COLOR_0 has {colors.shape[0]} × {colors.shape[1]} values for {count} vertices")
            colors = np.hstack([colors, np.ones((count, 1), np.float32)])[:, :4]
        joints = weights = None
        if skin is not None and attributes.JOINTS_0 is not None and attributes.WEIGHTS_0 is not None:
            skin_joints, skin_matrices = skin
            raw_joints = attribute(attributes.JOINTS_0, 4, "JOINTS_0")
            if raw_joints.dtype.kind not in "iu":
                raise self.fail(f"{where} JOINTS_0 are floats; glTF joints are unsigned integers")
            if raw_joints.size and int(raw_joints.max()) >= len(skin_joints):
                raise self.fail(f"{where} JOINTS_0 names joint {int(raw_joints.max())}; its skin has {len(skin_joints)}")
            weights = np.clip(attribute(attributes.WEIGHTS_0, 4, "WEIGHTS_0").astype(np.float64), 0.0, None)
            totals = weights.sum(axis=1, keepdims=True)
            unweighted = totals[:, 0] <= 1e-8
            weights = np.where(unweighted[:, None], [1.0, 0, 0, 0], weights / np.maximum(totals, 1e-8))
            raw_joints = raw_joints.astype(np.int64)
            per_vertex = np.einsum("vk,vkab->vab", weights, skin_matrices[raw_joints])
            joints = skin_joints[raw_joints]
            if unweighted.any():
                joints[unweighted] = node_index
                per_vertex[unweighted] = world[node_index]
        else:
            per_vertex = np.broadcast_to(world[node_index], (count, 4, 4))
        linear = per_vertex[:, :3, :3]
        world_positions = np.einsum("vab,vb->va", linear, positions) + per_vertex[:, :3, 3]
        if normals is not None:
            normals = _unit_rows(np.einsum("vab,vb->va", linear, normals.astype(np.float64)))
        targets, names = [], []
        mesh = document.meshes[mesh_index]
        target_names = _target_names(mesh, primitive)
        for target_index, target in enumerate(primitive.targets or []):
            accessor = target.get("POSITION") if isinstance(target, dict) else getattr(target, "POSITION", None)
            delta = np.zeros((count, 3)) if accessor is None else attribute(accessor, 3, f"morph {target_index} POSITION")
            targets.append(np.einsum("vab,vb->va", linear, np.asarray(delta, np.float64)).astype(np.float32))
            names.append(target_names[target_index] if target_index < len(target_names) else f"morph{target_index}")
        material = primitive.material
        return Primitive(
            node=node_index, mesh=mesh_index, positions=world_positions.astype(np.float32),
            normals=None if normals is None else normals.astype(np.float32),
            uvs=None if uvs is None else uvs.astype(np.float32),
            colors=None if colors is None else np.asarray(colors, np.float32),
            joints=joints, weights=None if weights is None else weights.astype(np.float32),
            triangles=indices.reshape(-1, 3), material=material, targets=targets, target_names=names,
        )

    def _material(self, index: int, material) -> MaterialInfo:
        pbr = material.pbrMetallicRoughness
        factor = tuple(float(c) for c in (pbr.baseColorFactor if pbr and pbr.baseColorFactor else (1, 1, 1, 1)))
        if len(factor) != 4 or not all(np.isfinite(factor)):
            raise self.fail(f"material {index} has baseColorFactor {factor!r}; expected 4 finite numbers")
        image = None
        if pbr is not None and pbr.baseColorTexture is not None:
            textures = self.raw.get("textures", [])
            texture = pbr.baseColorTexture.index
            if not isinstance(texture, int) or not 0 <= texture < len(textures):
                raise self.fail(f"material {index} uses texture {texture!r}; the file has {len(textures)}")
            image = textures[texture].get("source")
            if image is None:
                self.notes.append(f"material {index}'s texture has no PNG/JPEG source (only an extension's): drawn "
                                  "in its base colour")
            elif not isinstance(image, int) or not 0 <= image < len(self.raw.get("images", [])):
                raise self.fail(f"texture {texture} uses image {image!r}; the file has {len(self.raw.get('images', []))}")
        transform = None
        if image is not None:
            extensions = pbr.baseColorTexture.extensions or {}
            transform = _uv_transform(extensions.get("KHR_texture_transform"))
            if (extensions.get("KHR_texture_transform") or {}).get("texCoord", pbr.baseColorTexture.texCoord or 0):
                self.notes.append(f"material {index}'s texture uses a second UV set: drawn with the first")
        mode = material.alphaMode or "OPAQUE"
        if mode not in ("OPAQUE", "MASK", "BLEND"):
            raise self.fail(f"material {index} has alphaMode {mode!r}; allowed OPAQUE, MASK, BLEND")
        cutoff = material.alphaCutoff if material.alphaCutoff is not None else 0.5
        extensions = material.extensions or {}
        vrm1, vrm0 = extensions.get("VRMC_materials_mtoon"), self._vrm0_material(index, material.name)
        return MaterialInfo(material.name or f"material{index}", factor, image, transform, mode, float(cutoff),
                            bool(material.doubleSided), "KHR_materials_unlit" in extensions, _mtoon(vrm1, vrm0),
                            *self._mtoon_rim_outline(index, vrm1, vrm0), *_mtoon_blend(vrm1, vrm0),
                            self._mtoon_uv_motion(index, vrm1, vrm0))

    def _mtoon_uv_motion(self, index: int, vrm1: dict | None, vrm0: dict | None) -> tuple[float, float, float] | None:
        """MToon's UV animation (scroll x and y in UV units per second, turn about the UV centre in radians per second),
        VRM 0.x's converted as three-vrm does (its y scrolls the other way); None where nothing moves. Its mask
        texture is not read (a note says so): the whole material moves."""
        if isinstance(vrm1, dict):
            spec, flip, mask = vrm1, 1.0, vrm1.get("uvAnimationMaskTexture")
            names = ("uvAnimationScrollXSpeedFactor", "uvAnimationScrollYSpeedFactor", "uvAnimationRotationSpeedFactor")
        elif isinstance(vrm0, dict) and isinstance(vrm0.get("floatProperties"), dict):
            textures = vrm0.get("textureProperties")
            spec, flip = vrm0["floatProperties"], -1.0
            mask = textures.get("_UvAnimMaskTexture") if isinstance(textures, dict) else None
            names = ("_UvAnimScrollX", "_UvAnimScrollY", "_UvAnimRotation")
        else:
            return None
        values = [spec.get(name, 0.0) for name in names]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in values):
            self.notes.append(f"material {index}'s MToon UV animation {values!r} is not three numbers: drawn still")
            return None
        if not any(values):
            return None
        if mask is not None:
            self.notes.append(f"material {index}'s MToon UV animation mask is not read: the whole material moves")
        return float(values[0]), flip * float(values[1]), float(values[2])

    def _mtoon_rim_outline(self, index: int, vrm1: dict | None, vrm0: dict | None
                           ) -> tuple[MToonRim | None, MToonOutline | None]:
        """MToon's rim and outline (VRM 1.0 terms; VRM 0.x converted as three-vrm does: gamma colours, width in cm).

        A malformed value leaves a note and the material without rim and outline, as a malformed texture does; an
        outline wider than MAX_OUTLINE_WIDTH (5 cm, or 5 % of the screen height: ten times any VRoid default) would
        bury the avatar in its outline colour, and is drawn that wide, with a note.
        """
        try:
            rim, outline = self._read_mtoon_rim_outline(vrm1, vrm0)
        except ValueError as error:
            self.notes.append(f"material {index}'s MToon {error}: drawn without rim and outline")
            return None, None
        if outline is not None and outline.width > MAX_OUTLINE_WIDTH:
            unit = "m" if outline.mode == "world" else " of the screen height"
            self.notes.append(f"material {index}'s MToon outline is {outline.width:g}{unit} wide: drawn "
                              f"{MAX_OUTLINE_WIDTH:g}{unit} wide")
            outline = replace(outline, width=MAX_OUTLINE_WIDTH)
        return rim, outline

    @staticmethod
    def _read_mtoon_rim_outline(vrm1: dict | None, vrm0: dict | None) -> tuple[MToonRim | None, MToonOutline | None]:
        def number(value, name: str) -> float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise ValueError(f"{name} is {value!r}, not a finite number")
            return float(value)

        def unit(value: float) -> float:
            return min(max(value, 0.0), 1.0)

        def color(value, name: str, gamma: bool) -> tuple[float, float, float]:
            if not isinstance(value, (list, tuple)) or len(value) < 3:
                raise ValueError(f"{name} is {value!r}, not 3 numbers")
            rgb = np.clip([number(c, name) for c in value[:3]], 0.0, 1.0)
            return tuple(float(c) for c in (rgb ** 2.2 if gamma else rgb))

        if isinstance(vrm1, dict):
            rim = MToonRim(color(vrm1.get("parametricRimColorFactor", (0, 0, 0)), "parametricRimColorFactor", False),
                           max(number(vrm1.get("parametricRimFresnelPowerFactor", 1.0), "parametricRimFresnelPowerFactor"),
                               0.0),
                           number(vrm1.get("parametricRimLiftFactor", 0.0), "parametricRimLiftFactor"),
                           unit(number(vrm1.get("rimLightingMixFactor", 0.0), "rimLightingMixFactor")))
            mode = vrm1.get("outlineWidthMode", "none")
            if mode not in ("none", "worldCoordinates", "screenCoordinates"):
                raise ValueError(f"outlineWidthMode is {mode!r}, not none, worldCoordinates or screenCoordinates")
            outline = MToonOutline("world" if mode == "worldCoordinates" else "screen" if mode != "none" else "none",
                                   number(vrm1.get("outlineWidthFactor", 0.0), "outlineWidthFactor"),
                                   color(vrm1.get("outlineColorFactor", (0, 0, 0)), "outlineColorFactor", False),
                                   unit(number(vrm1.get("outlineLightingMixFactor", 1.0), "outlineLightingMixFactor")))
        elif isinstance(vrm0, dict):
            floats, vectors = vrm0.get("floatProperties"), vrm0.get("vectorProperties")
            floats, vectors = (part if isinstance(part, dict) else {} for part in (floats, vectors))
            rim = MToonRim(color(vectors.get("_RimColor", (0, 0, 0)), "_RimColor", True),
                           max(number(floats.get("_RimFresnelPower", 1.0), "_RimFresnelPower"), 0.0),
                           number(floats.get("_RimLift", 0.0), "_RimLift"),
                           unit(number(floats.get("_RimLightingMix", 0.0), "_RimLightingMix")))
            mode = number(floats.get("_OutlineWidthMode", 0), "_OutlineWidthMode")
            mixed = number(floats.get("_OutlineColorMode", 0), "_OutlineColorMode") == 1
            outline = MToonOutline({1.0: "world", 2.0: "screen"}.get(mode, "none"),
                                   0.01 * number(floats.get("_OutlineWidth", 0.0), "_OutlineWidth"),
                                   color(vectors.get("_OutlineColor", (0, 0, 0)), "_OutlineColor", True),
                                   unit(number(floats.get("_OutlineLightingMix", 1.0), "_OutlineLightingMix")) if mixed else 0.0)
        else:
            return None, None
        return (rim if any(rim.color) else None,
                outline if outline.mode != "none" and outline.width > 0 else None)

    def _vrm0_material(self, index: int, name: str | None) -> dict | None:
        """VRM 0.x keeps MToon settings beside the materials (`VRM.materialProperties`), matched by name."""
        properties = ((self.raw.get("extensions") or {}).get("VRM") or {}).get("materialProperties") or []
        for spec in properties:
            if isinstance(spec, dict) and spec.get("name") == name and "MToon" in str(spec.get("shader", "")):
                return spec
        return None

    def _image(self, index: int) -> np.ndarray | None:
        """RGBA pixels of a PNG/JPEG/WebP image; None (with a note) for a format Pillow cannot read, such as KTX2."""
        from PIL import Image

        spec = self.raw["images"][index]
        if spec.get("bufferView") is not None:
            data = bytes(self.view_bytes(spec["bufferView"])[0])
        elif spec.get("uri"):
            data = self._external(str(spec["uri"]), f"image {index}")
        else:
            raise self.fail(f"image {index} has neither a bufferView nor a URI")
        try:
            with Image.open(io.BytesIO(data)) as picture:
                if picture.format not in ("PNG", "JPEG", "WEBP"):
                    self.notes.append(f"image {index} is {picture.format}: its materials are drawn in their base colour")
                    return None
                width, height = picture.size
                if width * height > MAX_TEXTURE_PIXELS:
                    raise self.fail(f"image {index} is {width}×{height}; the studio reads textures up to "
                                    f"{MAX_TEXTURE_PIXELS} pixels")
                return np.asarray(picture.convert("RGBA"), np.uint8)
        except AvatarFormatError:
            raise
        except Image.UnidentifiedImageError:
            self.notes.append(f"image {index} is in a format the studio cannot decode (KTX2/Basis?): its materials are "
                              "drawn in their base colour")
            return None
        except Exception as error:  # noqa: BLE001 - Pillow raises many types for a damaged image
            raise self.fail(f"image {index} cannot be decoded ({type(error).__name__}: {error})") from None


def _target_names(mesh, primitive) -> list[str]:
    """Morph target names as exporters store them (mesh.extras.targetNames, Blender and UniVRM)."""
    for holder in (mesh, primitive):
        extras = getattr(holder, "extras", None)
        if isinstance(extras, dict) and isinstance(extras.get("targetNames"), list):
            return [str(n) for n in extras["targetNames"]]
    return []


def _mtoon(vrm1: dict | None, vrm0: dict | None) -> tuple[tuple[float, float, float], float, float] | None:
    """(shade colour, shading shift, shading toony) in VRM 1.0 terms; VRM 0.x values converted as three-vrm does."""
    try:
        if isinstance(vrm1, dict):
            shade = tuple(float(c) for c in vrm1.get("shadeColorFactor", (0.0, 0.0, 0.0)))[:3]
            return shade, float(vrm1.get("shadingShiftFactor", 0.0)), float(vrm1.get("shadingToonyFactor", 0.9))
        if isinstance(vrm0, dict):
            shade = [float(c) for c in (vrm0.get("vectorProperties") or {}).get("_ShadeColor", (0.97, 0.81, 0.86))][:3]
            floats = vrm0.get("floatProperties") or {}
            shift, toony = float(floats.get("_ShadeShift", 0.0)), float(floats.get("_ShadeToony", 0.9))
            shade_linear = tuple(float(c) ** 2.2 for c in np.clip(shade, 0.0, 1.0))  # Unity gamma-space colour
            return shade_linear, -shift - (1.0 - toony), toony + (1.0 - toony) * (0.5 + 0.5 * shift)
    except (TypeError, ValueError):
        return None
    return None


def _mtoon_blend(vrm1: dict | None, vrm0: dict | None) -> tuple[int, bool]:
    """(render queue, depth write) of an MToon material, which order and mask its blended primitives: VRM 1.0's
    renderQueueOffsetNumber and transparentWithZWrite, VRM 0.x's renderQueue (-1, the shader's own: 3000, where
    blended ones start) and _ZWrite. A value of the wrong type counts as absent."""
    if isinstance(vrm1, dict):
        queue, write = vrm1.get("renderQueueOffsetNumber", 0), vrm1.get("transparentWithZWrite", False)
    elif isinstance(vrm0, dict):
        floats = vrm0.get("floatProperties")
        queue, write = vrm0.get("renderQueue", -1), isinstance(floats, dict) and floats.get("_ZWrite") == 1
        queue = 3000 if isinstance(queue, int) and queue < 0 else queue
    else:
        return 0, False
    whole = isinstance(queue, (int, float)) and not isinstance(queue, bool) and bool(np.isfinite(queue))
    return int(np.clip(queue, -10_000, 10_000)) if whole else 0, write is True


def _uv_transform(spec) -> np.ndarray | None:
    """KHR_texture_transform's matrix: translation · rotation · scale, applied to (u, v, 1)."""
    if not isinstance(spec, dict):
        return None
    ox, oy = (float(v) for v in spec.get("offset", (0.0, 0.0)))
    sx, sy = (float(v) for v in spec.get("scale", (1.0, 1.0)))
    angle = float(spec.get("rotation", 0.0))
    cos, sin = np.cos(angle), np.sin(angle)
    matrix = np.array([[1, 0, ox], [0, 1, oy], [0, 0, 1]]) @ np.array([[cos, sin, 0], [-sin, cos, 0], [0, 0, 1]]) \
        @ np.diag([sx, sy, 1.0])
    return matrix if np.isfinite(matrix).all() else None


def _trs(translation, rotation, scale) -> np.ndarray:
    t = np.asarray(translation if translation is not None else (0, 0, 0), np.float64)
    x, y, z, w = np.asarray(rotation if rotation is not None else (0, 0, 0, 1), np.float64)
    s = np.asarray(scale if scale is not None else (1, 1, 1), np.float64)
    norm = max(float(np.sqrt(x * x + y * y + z * z + w * w)), 1e-12)
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    rotation_matrix = np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])
    out = np.eye(4)
    out[:3, :3] = rotation_matrix * s[None, :]
    out[:3, 3] = t
    return out


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
