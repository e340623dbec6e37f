"""An MP4 for the web: its index (moov) before the media data, and colours tagged BT.709 limited range."""

from __future__ import annotations

import os
import struct

import numpy as np

from render.video import render_video
from studio.frame import FrameState

os.environ.setdefault("EGL_PLATFORM", "surfaceless")


def _top_level_atoms(path) -> list[str]:
    data = path.read_bytes()
    atoms, position = [], 0
    while position + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[position:position + 8])
        if size == 1:  # a 64-bit size follows
            size = struct.unpack(">Q", data[position + 8:position + 16])[0]
        atoms.append(kind.decode("latin-1"))
        position += size if size else len(data)
    return atoms


def test_mp4_has_moov_before_mdat_and_bt709_limited_range_tags(tmp_path):
    import av

    out = tmp_path / "web.mp4"
    frames = [FrameState(media_time_s=k / 30) for k in range(6)]
    tone = (0.2 * np.sin(np.arange(16000 // 5) * 0.05)).astype(np.float32)
    render_video(frames, out, fps=30, size=(96, 64), audio=(tone, 16000))
    atoms = _top_level_atoms(out)
    assert "moov" in atoms and "mdat" in atoms and atoms.index("moov") < atoms.index("mdat"), atoms
    with av.open(str(out)) as container:
        context = container.streams.video[0].codec_context
        assert (int(context.color_primaries), int(context.color_trc), int(context.colorspace)) == (1, 1, 1)  # BT.709
        assert int(context.color_range) == 1  # MPEG: limited ("tv") range
        picture = next(container.decode(video=0))
        assert (int(picture.colorspace), int(picture.color_range)) == (1, 1)
