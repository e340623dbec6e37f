"""Reading and writing avatar files: our SMPL-X-compatible `.npz`, and SMPL-X files a user owns.

A user's `.pkl` SMPL-X files were pickled with chumpy arrays and scipy sparse matrices;
they are read with an unpickler that maps those classes to small stand-ins, so neither
chumpy nor scipy is needed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT
from studio.avatar.emotions import EMOTIONS, ExpressionDrive
from studio.avatar.gltf import GLTF_SUFFIXES
from studio.avatar.model import NUM_POSE_CORRECTIVES, AvatarFormatError, AvatarModel, Material
from studio.avatar.skeleton import NUM_JOINTS
from studio.fileio import atomic_write
from studio.paths import asset_path

FORMAT_VERSION = 1
SMPLX_BETA_COLUMNS = 300
SMPLX_EXPRESSION_COLUMNS = 100
NUM_LANDMARKS = 51
AVATAR_SUFFIXES = (".npz", ".pkl", *GLTF_SUFFIXES)
AVATAR_SUFFIXES_TEXT = ", ".join(AVATAR_SUFFIXES)
AVATAR_FILE_FILTER = f"Avatar files ({' '.join('*' + s for s in AVATAR_SUFFIXES)});;All files (*)"  # for file dialogs
_REQUIRED = ("v_template", "f", "J_regressor", "weights", "shapedirs")


def default_avatar_path() -> Path:
    return asset_path("avatars", "default.npz")


def load_avatar(path: str | os.PathLike) -> AvatarModel:
    """Load an avatar file (.npz, SMPL-X .pkl, or .glb/.gltf/.vrm); AvatarFormatError says what is wrong."""
    path = Path(path)
    if not path.exists():
        raise AvatarFormatError(f"{path}: no such file")
    if path.is_dir():
        raise AvatarFormatError(f"{path}: is a folder; expected an avatar file ({AVATAR_SUFFIXES_TEXT})")
    suffix = path.suffix.lower()
    if suffix in GLTF_SUFFIXES:
        from studio.avatar.imported import load_gltf_avatar

        return load_gltf_avatar(path)
    if suffix not in _READERS:
        raise AvatarFormatError(f"{path}: unsupported file type {suffix or '(none)'!r}; allowed: {AVATAR_SUFFIXES_TEXT}")
    reader, what = _READERS[suffix]
    try:
        if suffix == ".npz" and not zipfile.is_zipfile(path):
            raise zipfile.BadZipFile
        arrays = reader(path)
    except AvatarFormatError:
        raise
    except PermissionError:
        raise AvatarFormatError(f"{path} cannot be read: permission denied") from None
    except _ForeignClass as error:
        raise AvatarFormatError(f"{path} is not a valid avatar: {error}") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, AttributeError,
            ImportError, IndexError, KeyError, TypeError):
        # numpy's and pickle's own texts repeat the path or suggest loading pickles unsafely: say what it is not
        raise AvatarFormatError(f"{path} is not a valid avatar: {what}") from None
    return _model_from_arrays(arrays, str(path))


def load_avatar_or_default(path: str | os.PathLike | None) -> tuple[AvatarModel, str | None]:
    """The requested avatar, or the default one and the reason it was refused."""
    if path is not None:
        try:
            return load_avatar(path), None
        except AvatarFormatError as error:
            return load_avatar(default_avatar_path()), f"{error}; using the default avatar instead"
    return load_avatar(default_avatar_path()), None


_READ_ON_DEMAND = ("shapedirs", "posedirs")  # SMPL-X's largest arrays, of which the studio uses a part or nothing
_BLOCK_BYTES = 4 << 20


def _read_npz(path: Path) -> dict[str, np.ndarray | _NpzArray]:
    arrays: dict[str, np.ndarray | _NpzArray] = {}
    with np.load(path, allow_pickle=False) as data:
        for key in data.files:
            if key in _READ_ON_DEMAND:
                arrays[key] = _NpzArray(path, key)
                continue
            try:
                arrays[key] = data[key]
            except ValueError:
                continue  # an object array we do not use (e.g. dynamic landmark tables)
    return arrays


class _NpzArray:
    """One array of an `.npz`, read from its zip member a block of rows at a time, and only the part asked for.

    An SMPL-X file carries 400 shape columns (300 body, 100 expression) and 486 pose correctives; ours keep that
    layout so that smplx's own loader reads them, but the studio uses 62 of the columns and our correctives are
    zero. Reading them whole took the default avatar's load to a 410 MB peak for 40 MB of arrays kept.
    A damaged member is an AvatarFormatError naming the file and the array.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key = path, key
        with self._member() as member:
            self.shape, self._fortran, self.dtype = self._header(member)
        self.ndim = len(self.shape)

    @contextlib.contextmanager
    def _member(self) -> Iterator[IO[bytes]]:
        try:
            with zipfile.ZipFile(self.path) as archive, archive.open(f"{self.key}.npy") as member:
                yield member
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as error:
            raise AvatarFormatError(f"{self.path} is not a valid avatar: its '{self.key}' array is damaged ({error})") from None

    @staticmethod
    def _header(member: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
        version = np.lib.format.read_magic(member)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        return read(member)

    def read(self) -> np.ndarray:
        with self._member() as member:
            return np.lib.format.read_array(member, allow_pickle=False)

    def _blocks(self) -> Iterator[np.ndarray]:
        """The array in C order, a block of rows (first axis) at a time."""
        row_bytes = max(1, int(np.prod(self.shape[1:])) * self.dtype.itemsize)
        rows = max(1, _BLOCK_BYTES // row_bytes)
        with self._member() as member:
            self._header(member)
            for first in range(0, self.shape[0], rows):
                count = min(rows, self.shape[0] - first)
                data = member.read(count * row_bytes)
                if len(data) != count * row_bytes:
                    raise AvatarFormatError(f"{self.path} is not a valid avatar: its '{self.key}' array is truncated")
                yield np.frombuffer(data, self.dtype).reshape(count, *self.shape[1:])

    def _streamable(self) -> bool:
        return self.ndim >= 2 and not self._fortran and not self.dtype.hasobject

    def last_axis(self, *selections: slice) -> list[np.ndarray]:
        """Ranges of the last axis as float32, in one pass over the file."""
        if not self._streamable():
            whole = self.read()
            return [np.ascontiguousarray(whole[..., s], np.float32) for s in selections]
        widths = [len(range(*selection.indices(self.shape[-1]))) for selection in selections]
        outs = [np.zeros((*self.shape[:-1], width), np.float32) for width in widths]
        row = 0
        for block in self._blocks():
            for out, selection in zip(outs, selections):
                out[row:row + len(block)] = block[..., selection]
            row += len(block)
        return outs

    def any_nonzero(self) -> bool:
        if not self._streamable():
            return bool(np.any(self.read()))
        return any(np.any(block) for block in self._blocks())


def _last_axis(array: np.ndarray | _NpzArray, *selections: slice) -> list[np.ndarray]:
    if isinstance(array, _NpzArray):
        return array.last_axis(*selections)
    return [np.ascontiguousarray(array[..., s], np.float32) for s in selections]


class _ChumpyStandIn:
    """Receives a pickled chumpy array's state; `x` holds its values."""

    def __setstate__(self, state):
        self.__dict__.update(state if isinstance(state, dict) else {"x": state})

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.__dict__.get("x"), dtype=dtype)


class _SparseStandIn:
    """Receives a pickled scipy CSC/CSR matrix's state and rebuilds it dense."""

    compressed_axis = 1

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __array__(self, dtype=None, copy=None):
        shape = tuple(self.__dict__.get("_shape") or self.__dict__["shape"])
        data, indices, indptr = self.data, self.indices, self.indptr
        dense = np.zeros(shape, dtype=dtype or data.dtype)
        for outer in range(len(indptr) - 1):
            span = slice(indptr[outer], indptr[outer + 1])
            if self.compressed_axis == 1:
                dense[indices[span], outer] = data[span]
            else:
                dense[outer, indices[span]] = data[span]
        return dense


class _CsrStandIn(_SparseStandIn):
    compressed_axis = 0


class _ForeignClass(pickle.UnpicklingError):
    """A pickle that names a class an avatar never holds (code, not arrays)."""


class _SmplxUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if module.startswith("chumpy"):
            return _ChumpyStandIn
        if module.startswith("scipy.sparse"):
            return _CsrStandIn if "csr" in name else _SparseStandIn
        if module.startswith("numpy") or module in ("builtins", "copyreg", "collections", "_codecs"):
            return super().find_class(module, name)
        raise _ForeignClass(f"refusing to load class {module}.{name} from an avatar file")


def _read_pkl(path: Path) -> dict[str, np.ndarray]:
    with open(path, "rb") as handle:
        raw = _SmplxUnpickler(handle, encoding="latin1").load()
    if not isinstance(raw, dict):
        raise AvatarFormatError(f"{path}: holds a {type(raw).__name__}, expected a dict of SMPL-X arrays")
    arrays = {}
    for key, value in raw.items():
        if isinstance(value, (np.ndarray, _ChumpyStandIn, _SparseStandIn)):
            arrays[key] = np.asarray(value)
        elif isinstance(value, (list, tuple)) and key in ("kintree_table", "f"):
            arrays[key] = np.asarray(value)
    return arrays


_READERS = {
    ".npz": (_read_npz, "not a NumPy .npz archive (or chumpy .pkl)"),
    ".pkl": (_read_pkl, "not a pickled SMPL-X model (chumpy .pkl) of arrays"),
}


def _model_from_arrays(arrays: dict[str, np.ndarray], source: str) -> AvatarModel:
    missing = [key for key in _REQUIRED if key not in arrays]
    if missing:
        raise AvatarFormatError(
            f"{source}: missing key(s) {', '.join(missing)}; an avatar file needs {', '.join(_REQUIRED)}"
        )
    shapedirs = arrays["shapedirs"]
    shapedirs = shapedirs if isinstance(shapedirs, _NpzArray) else np.asarray(shapedirs)
    if shapedirs.ndim != 3 or shapedirs.shape[1] != 3:
        raise AvatarFormatError(f"{source}: 'shapedirs' has shape {shapedirs.shape}, expected (V, 3, N)")
    names = [str(n) for n in arrays.get("expression_names", ())]
    ours = names == list(ARKIT_NAMES)
    if ours:
        if shapedirs.shape[2] < SMPLX_BETA_COLUMNS + NUM_ARKIT:
            raise AvatarFormatError(
                f"{source}: 'shapedirs' has {shapedirs.shape[2]} columns; "
                f"an ARKit avatar needs ≥ {SMPLX_BETA_COLUMNS + NUM_ARKIT}"
            )
        num_betas = int(arrays.get("num_betas", 10))
        drive = _expression_drive(arrays, source)
        columns = NUM_ARKIT if drive is None else drive.columns
        if shapedirs.shape[2] < SMPLX_BETA_COLUMNS + columns:
            raise AvatarFormatError(f"{source}: 'shapedirs' has {shapedirs.shape[2]} columns; its 'expression_drive' "
                                    f"needs ≥ {SMPLX_BETA_COLUMNS + columns}")
        shape_dirs, expr_dirs = _last_axis(shapedirs, slice(0, num_betas),
                                           slice(SMPLX_BETA_COLUMNS, SMPLX_BETA_COLUMNS + columns))
    else:
        drive = None
        num_betas = min(10, shapedirs.shape[2])
        (shape_dirs,) = _last_axis(shapedirs, slice(0, num_betas))
        expr_dirs = np.zeros((shapedirs.shape[0], 3, NUM_ARKIT), np.float32)
    posedirs = arrays.get("posedirs")
    if isinstance(posedirs, _NpzArray):
        posedirs = posedirs.read() if posedirs.any_nonzero() else None
    if posedirs is not None and posedirs.ndim == 2 and posedirs.shape[0] == NUM_POSE_CORRECTIVES:
        posedirs = posedirs.T.reshape(-1, 3, NUM_POSE_CORRECTIVES)  # SMPL-H style (486, V*3)
    if posedirs is not None and not np.any(posedirs):
        posedirs = None
    parents = (-1, *[int(p) for p in np.asarray(arrays["kintree_table"])[0, 1:]]) if "kintree_table" in arrays else None
    materials = {}
    if "materials_json" in arrays:
        for part, spec in json.loads(str(arrays["materials_json"])).items():
            materials[part] = Material(tuple(spec["color"]), spec.get("specular", 0.15), spec.get("shininess", 24.0))
    kwargs = {}
    if parents is not None:
        if len(parents) != NUM_JOINTS:
            raise AvatarFormatError(f"{source}: 'kintree_table' has {len(parents)} joints, expected {NUM_JOINTS} (SMPL-X)")
        kwargs["parents"] = parents
    if "part_labels" in arrays and "part_names" in arrays:
        kwargs["part_labels"] = np.asarray(arrays["part_labels"]).astype(np.uint8)
        kwargs["part_names"] = tuple(str(n) for n in arrays["part_names"])
    if "vertex_colors" in arrays:
        kwargs["vertex_colors"] = np.asarray(arrays["vertex_colors"], np.float32)
    return AvatarModel(
        name=str(arrays.get("name", Path(source).stem)),
        v_template=np.asarray(arrays["v_template"], np.float32),
        faces=np.asarray(arrays["f"]).astype(np.int32) if np.asarray(arrays["f"]).dtype.kind in "iu" else np.asarray(arrays["f"]),
        joint_regressor=np.asarray(arrays["J_regressor"], np.float32),
        skin_weights=np.asarray(arrays["weights"], np.float32),
        shape_dirs=shape_dirs,
        expr_dirs=expr_dirs,
        expression_drive=drive,
        pose_dirs=None if posedirs is None else np.asarray(posedirs, np.float32),
        materials=materials,
        has_arkit_expressions=ours,
        source=source,
        **kwargs,
    )


def _expression_drive(arrays: dict, source: str) -> ExpressionDrive | None:
    """The emotion rules saved with an imported avatar's extra expression columns (`expression_drive` JSON), if any."""
    if "expression_drive" not in arrays:
        return None
    text = str(arrays["expression_drive"])
    try:
        spec = json.loads(text)
        return ExpressionDrive(tuple(spec["emotions"]), tuple(bool(b) for b in spec["binary"]),
                               tuple(dict(rules) for rules in spec["overrides"]))
    except (ValueError, TypeError, KeyError) as error:
        raise AvatarFormatError(f"{source}: 'expression_drive' is {text[:80]!r}, expected JSON with emotions "
                                f"({', '.join(EMOTIONS)}), binary and overrides, one each: {error}") from None


def smplx_arrays(model: AvatarModel) -> dict[str, np.ndarray]:
    """The arrays of an SMPL-X `.npz` that `smplx.create(..., ext='npz')` loads unpatched.

    An imported avatar's emotion columns follow the 52 ARKit ones among SMPL-X's expression columns, and their
    rules go in `expression_drive` (JSON), so a saved avatar still shows its own happy face.
    """
    vertex_count = model.num_vertices
    shapedirs = np.zeros((vertex_count, 3, SMPLX_BETA_COLUMNS + SMPLX_EXPRESSION_COLUMNS), np.float32)
    shapedirs[:, :, : model.num_betas] = model.shape_dirs
    columns = model.expr_dirs.shape[2]
    shapedirs[:, :, SMPLX_BETA_COLUMNS : SMPLX_BETA_COLUMNS + columns] = model.expr_dirs
    posedirs = model.pose_dirs if model.pose_dirs is not None else np.zeros((vertex_count, 3, NUM_POSE_CORRECTIVES), np.float32)
    kintree = np.array([[p if p >= 0 else 4294967295 for p in model.parents], range(NUM_JOINTS)], np.int64)
    landmark_faces = np.linspace(0, len(model.faces) - 1, NUM_LANDMARKS).astype(np.int64)
    arrays = {
        "v_template": model.v_template,
        "f": model.faces.astype(np.int32),
        "shapedirs": shapedirs,
        "posedirs": posedirs,
        "J_regressor": model.joint_regressor,
        "weights": model.skin_weights,
        "kintree_table": kintree,
        "hands_componentsl": np.eye(45, dtype=np.float32),
        "hands_componentsr": np.eye(45, dtype=np.float32),
        "hands_meanl": np.zeros(45, np.float32),
        "hands_meanr": np.zeros(45, np.float32),
        "lmk_faces_idx": landmark_faces,
        "lmk_bary_coords": np.full((NUM_LANDMARKS, 3), 1 / 3, np.float32),
        "expression_names": np.array(ARKIT_NAMES),
        "num_betas": np.array(model.num_betas),
        "name": np.array(model.name),
        "format_version": np.array(FORMAT_VERSION),
        "materials_json": np.array(json.dumps({
            part: {"color": list(m.color), "specular": m.specular, "shininess": m.shininess}
            for part, m in model.materials.items()
        })),
    }
    drive = model.expression_drive
    if drive is not None:
        arrays["expression_drive"] = np.array(json.dumps({"emotions": list(drive.emotions), "binary": list(drive.binary),
                                                          "overrides": [dict(rules) for rules in drive.overrides]}))
    if model.part_labels is not None:
        arrays["part_labels"] = model.part_labels
        arrays["part_names"] = np.array(model.part_names)
    if model.vertex_colors is not None:
        arrays["vertex_colors"] = model.vertex_colors
    return arrays


def save_avatar(model: AvatarModel, path: str | os.PathLike) -> None:
    """Write an SMPL-X-compatible `.npz` atomically: a failed write leaves any old file intact."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **smplx_arrays(model))
    atomic_write(path, buffer.getvalue())
