"""Avatar files: round trip, SMPL-X pickles without chumpy, and refusals that name the problem."""

from __future__ import annotations

import pickle
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.avatar.io import load_avatar, load_avatar_or_default, save_avatar, smplx_arrays
from studio.avatar.model import AvatarFormatError


def test_round_trip_keeps_every_array(tmp_path, random_avatar):
    path = tmp_path / "a.npz"
    save_avatar(random_avatar, path)
    loaded = load_avatar(path)
    for name in ("v_template", "faces", "joint_regressor", "skin_weights", "shape_dirs", "expr_dirs", "part_labels"):
        assert np.array_equal(getattr(loaded, name), getattr(random_avatar, name)), name
    assert loaded.part_names == random_avatar.part_names
    assert loaded.materials == random_avatar.materials
    assert loaded.has_arkit_expressions


def test_arrays_are_read_only(random_avatar):
    with pytest.raises(ValueError):
        random_avatar.v_template[0, 0] = 1.0


def _write_npz(path, arrays):
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda a: a.pop("weights"), "missing key(s) weights"),
        (lambda a: a.__setitem__("v_template", a["v_template"][:, :2]), "'v_template' has shape"),
        (lambda a: a.__setitem__("f", a["f"] + 10_000), "'faces' indexes vertex"),
        (lambda a: a.__setitem__("J_regressor", a["J_regressor"][:50]), "'J_regressor' has shape"),
        (lambda a: a["shapedirs"].__setitem__((0, 0, 0), np.nan), "NaN"),
        (lambda a: a["weights"].__setitem__((3, 0), 5.0), "'weights' row 3 sums to"),
    ],
)
def test_malformed_files_are_refused_with_the_file_and_the_problem(tmp_path, random_avatar, mutate, expected):
    arrays = {k: np.array(v) for k, v in smplx_arrays(random_avatar).items()}
    mutate(arrays)
    path = _write_npz(tmp_path / "bad.npz", arrays)
    before = path.read_bytes()
    with pytest.raises(AvatarFormatError) as error:
        load_avatar(path)
    assert str(path) in str(error.value) and expected in str(error.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize("content", [b"", b"not a zip at all", b"PK\x03\x04truncated"])
def test_garbage_files_are_refused(tmp_path, content):
    path = tmp_path / "garbage.npz"
    path.write_bytes(content)
    with pytest.raises(AvatarFormatError, match="garbage.npz") as error:
        load_avatar(path)
    assert str(error.value) == f"{path} is not a valid avatar: not a NumPy .npz archive (or chumpy .pkl)"


@pytest.mark.parametrize("suffix", [".npz", ".pkl"])
def test_random_bytes_say_what_the_file_is_not_and_never_suggest_unsafe_loading(tmp_path, suffix):
    path = tmp_path / f"random{suffix}"
    path.write_bytes(np.random.default_rng(6).bytes(4096))
    with pytest.raises(AvatarFormatError) as error:
        load_avatar(path)
    message = str(error.value)
    assert message.startswith(f"{path} is not a valid avatar: not a ")
    assert message.count(str(path)) == 1
    assert "pickle=" not in message and "pickle.load" not in message and "trust" not in message


def test_missing_file_and_wrong_type(tmp_path):
    with pytest.raises(AvatarFormatError, match="no such file"):
        load_avatar(tmp_path / "nope.npz")
    (tmp_path / "mesh.obj").write_text("v 0 0 0\n")
    with pytest.raises(AvatarFormatError, match="allowed: .npz, .pkl"):
        load_avatar(tmp_path / "mesh.obj")


def test_a_bad_avatar_falls_back_to_the_default(tmp_path):
    path = tmp_path / "broken.npz"
    path.write_bytes(b"junk")
    model, warning = load_avatar_or_default(path)
    assert model.num_vertices >= 9930
    assert "broken.npz" in warning and "default avatar" in warning


def test_chumpy_pickled_smplx_file_loads_without_chumpy(tmp_path, random_avatar, monkeypatch):
    """A user's SMPL-X .pkl holds chumpy arrays; we read them with stand-ins for the classes."""
    chumpy = types.ModuleType("chumpy")
    chumpy_ch = types.ModuleType("chumpy.ch")

    class Ch:
        def __init__(self, x):
            self.x = x

    Ch.__module__, Ch.__qualname__ = "chumpy.ch", "Ch"
    chumpy_ch.Ch = Ch
    monkeypatch.setitem(sys.modules, "chumpy", chumpy)
    monkeypatch.setitem(sys.modules, "chumpy.ch", chumpy_ch)
    arrays = smplx_arrays(random_avatar)
    raw = {
        "v_template": Ch(np.array(arrays["v_template"])),
        "f": np.array(arrays["f"]),
        "shapedirs": Ch(np.array(arrays["shapedirs"][:, :, :20])),
        "J_regressor": np.array(arrays["J_regressor"]),
        "weights": Ch(np.array(arrays["weights"])),
        "kintree_table": np.array(arrays["kintree_table"]),
    }
    path = tmp_path / "SMPLX_NEUTRAL.pkl"
    path.write_bytes(pickle.dumps(raw, protocol=2))
    monkeypatch.delitem(sys.modules, "chumpy")
    monkeypatch.delitem(sys.modules, "chumpy.ch")
    model = load_avatar(path)
    assert np.allclose(model.v_template, random_avatar.v_template)
    assert model.num_betas == 10
    assert not model.has_arkit_expressions


def test_pickle_with_foreign_classes_is_refused(tmp_path):
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"v_template": types.SimpleNamespace(a=1)}))
    with pytest.raises(AvatarFormatError, match="refusing to load class"):
        load_avatar(path)


def test_the_default_avatar_loads_in_the_memory_of_the_arrays_it_keeps():
    import tracemalloc

    from studio.avatar.io import default_avatar_path

    tracemalloc.start()
    try:
        avatar = load_avatar(default_avatar_path())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    kept = sum(value.nbytes for value in vars(avatar).values() if isinstance(value, np.ndarray))
    # before: the file's 400 shape columns and 486 zero pose correctives read whole (389 MB traced for 40 MB kept)
    assert peak < 2.5 * kept, f"{peak / 1e6:.0f} MB traced to keep {kept / 1e6:.0f} MB"
    full = np.load(default_avatar_path())["shapedirs"]
    assert np.array_equal(avatar.shape_dirs, full[:, :, :10]) and np.array_equal(avatar.expr_dirs, full[:, :, 300:352])
    assert avatar.pose_dirs is None  # the correctives are all zero


def test_a_damaged_shape_array_is_refused_naming_the_file_and_the_array(tmp_path, random_avatar):
    import zipfile

    path = _write_npz(tmp_path / "damaged.npz", smplx_arrays(random_avatar))
    with zipfile.ZipFile(path) as archive:
        member = archive.getinfo("shapedirs.npy")
    data = bytearray(path.read_bytes())
    name_length, extra_length = int.from_bytes(data[member.header_offset + 26:member.header_offset + 28], "little"), \
        int.from_bytes(data[member.header_offset + 28:member.header_offset + 30], "little")
    data[member.header_offset + 30 + name_length + extra_length + member.file_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(AvatarFormatError, match="its 'shapedirs' array is damaged") as error:
        load_avatar(path)
    assert str(path) in str(error.value) and path.read_bytes() == before


def test_an_imported_avatar_saved_as_npz_keeps_its_emotions(tmp_path):
    """A VRM's happy expression (an extra column with its isBinary/override rules) survives a save and reload."""
    imported = load_avatar(Path(__file__).resolve().parents[2] / "data" / "avatars" / "humanoid_vrm1.vrm")
    assert imported.expression_drive is not None and imported.expr_dirs.shape[2] > 52
    path = tmp_path / "imported.npz"
    save_avatar(imported, path)
    loaded = load_avatar(path)
    assert loaded.expression_drive == imported.expression_drive
    assert np.abs(loaded.expr_dirs - imported.expr_dirs).max() < 1e-6
    smile = np.zeros(NUM_ARKIT, np.float32)
    smile[[ARKIT_INDEX[n] for n in ("mouthSmileLeft", "mouthSmileRight", "cheekSquintLeft", "cheekSquintRight")]] = 1.0
    assert imported.morph_weights(smile)[NUM_ARKIT] == 1.0  # happy
    assert np.array_equal(loaded.morph_weights(smile), imported.morph_weights(smile))
    arrays = {k: np.array(v) for k, v in smplx_arrays(imported).items()}
    arrays["expression_drive"] = np.array('{"emotions": ["giddy"], "binary": [false], "overrides": [{}]}')
    with pytest.raises(AvatarFormatError, match=r"damaged\.npz: 'expression_drive' is .*giddy"):
        load_avatar(_write_npz(tmp_path / "damaged.npz", arrays))
