"""Build the default avatar's mesh levels of detail: `assets/avatars/default.lod-{medium,low}[-face].npz`.

`-face` files keep the face (every vertex the ARKit shapes move) at full detail, for presets with
`face: high`; the others decimate the face too. Deterministic: running it again rebuilds the same files.

    python assets/build_lod.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from studio.avatar.io import default_avatar_path, load_avatar, save_avatar  # noqa: E402
from studio.avatar.lod import FACE_PART_RATIOS, LOD_RATIOS, decimate, face_region, lod_path  # noqa: E402


def main() -> int:
    model = load_avatar(default_avatar_path())
    keep = face_region(model)
    for lod, ratio in LOD_RATIOS.items():
        for keep_face in (True, False):
            out = lod_path("default", lod, keep_face)
            built = (decimate(model, ratio, keep) if keep_face
                     else decimate(model, ratio, part_ratios={**FACE_PART_RATIOS, "head": max(ratio, 0.5)}))
            save_avatar(built, out)
            print(f"{out.name}: {built.num_vertices} vertices, {len(built.faces)} triangles, "
                  f"{out.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
