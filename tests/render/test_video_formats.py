"""Video files by suffix: a transparent background keeps its alpha where the format can (ProRes 4444 MOV, VP9
WebM) and is refused where it cannot (MP4), a .mov is a real QuickTime file, an unknown suffix is refused."""

from __future__ import annotations

import pytest

from render.video import alpha_range, render_video, video_format
from studio.frame import FrameState

FRAMES = [FrameState()] * 4
SIZE = (160, 96)


@pytest.mark.parametrize("suffix", [".mov", ".webm"])
def test_a_transparent_background_keeps_its_alpha(tmp_path, ellipsoid_avatar, suffix):
    out = tmp_path / f"clear{suffix}"
    render_video(FRAMES, out, fps=4, size=SIZE, avatar=ellipsoid_avatar, background="transparent", camera="head")
    assert alpha_range(out) == (0, 255), "clear around the avatar, opaque on it"


def test_mov_is_a_quicktime_file_and_mp4_an_mp4(tmp_path, ellipsoid_avatar):
    for name, brand in (("clip.mov", b"qt  "), ("clip.mp4", b"isom")):
        out = tmp_path / name
        render_video(FRAMES, out, fps=4, size=SIZE, avatar=ellipsoid_avatar)
        head = out.read_bytes()[:12]
        assert head[4:8] == b"ftyp" and head[8:12] == brand, (name, head)


def test_a_transparent_mp4_is_refused_and_nothing_is_written(tmp_path, ellipsoid_avatar):
    out = tmp_path / "clear.mp4"
    with pytest.raises(ValueError, match=r"\.mp4 cannot keep a transparent background; use \.mov \(prores_ks\) "
                                         r"or \.webm \(libvpx-vp9\)"):
        render_video(FRAMES, out, fps=4, size=SIZE, avatar=ellipsoid_avatar, background="transparent")
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match=r"video files end in \.mp4, \.mov, \.webm"):
        video_format(tmp_path / "clip.avi")
