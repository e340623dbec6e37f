"""Video export: FrameStates rendered offscreen and encoded by the file's suffix, written atomically.

`.mp4`: H.264 with AAC audio. `.mov`: ProRes 4444 with PCM audio and `.webm`: VP9 with Opus audio, both
keeping the alpha channel when the background is transparent (an MP4 has none: it is refused).

The file is written beside the target under a temporary name and renamed only when complete, so a
failure midway (a bad frame, a full disk, a crash) never leaves a truncated MP4 at `out_path` and never
destroys an earlier good file there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import numpy as np

from studio.avatar.model import AvatarModel
from studio.fileio import check_output_file
from studio.frame import FrameState

_AUDIO_CHUNK = 1024  # AAC frame size


class VideoFormat:
    """How one container is written: video codec, pixel formats (opaque, with alpha), audio codec and rate;
    `container_options` for the muxer, and `bt709`: pixels converted with and tagged as BT.709, limited range."""

    def __init__(self, container: str, codec: str, pix_fmt: str, alpha_pix_fmt: str | None, audio_codec: str,
                 options: dict[str, str], audio_rate: int | None = None, container_options: dict[str, str] | None = None,
                 bt709: bool = False) -> None:
        self.container, self.codec, self.pix_fmt, self.alpha_pix_fmt = container, codec, pix_fmt, alpha_pix_fmt
        self.audio_codec, self.options, self.audio_rate = audio_codec, options, audio_rate
        self.container_options, self.bt709 = dict(container_options or {}), bt709


VIDEO_FORMATS = {
    # for the web: the index (moov) before the data, so a browser plays while it downloads; colours tagged
    # as what they are (untagged H.264 is guessed as BT.601 by some players and BT.709 by others)
    ".mp4": VideoFormat("mp4", "libx264", "yuv420p", None, "aac", {"preset": "veryfast"},
                        container_options={"movflags": "+faststart"}, bt709=True),
    ".mov": VideoFormat("mov", "prores_ks", "yuv422p10le", "yuva444p10le", "pcm_s16le", {"profile": "4"}),
    # Opus runs at 48 kHz: PyAV's encoder resamples whatever rate comes in
    ".webm": VideoFormat("webm", "libvpx-vp9", "yuv420p", "yuva420p", "libopus",
                         {"deadline": "realtime", "cpu-used": "8", "row-mt": "1", "b": "0"}, audio_rate=48000),
}


def video_format(path: str | os.PathLike, background: str | None = None) -> VideoFormat:
    """The format the file's suffix names; a ValueError for an unknown suffix, and for a transparent background
    in a format without alpha (it would come out black, silently)."""
    suffix = Path(path).suffix.lower()
    if suffix not in VIDEO_FORMATS:
        raise ValueError(f"cannot write {path}: video files end in {', '.join(VIDEO_FORMATS)}")
    spec = VIDEO_FORMATS[suffix]
    if background == "transparent" and spec.alpha_pix_fmt is None:
        keeping = [f"{name} ({kind.codec})" for name, kind in VIDEO_FORMATS.items() if kind.alpha_pix_fmt]
        raise ValueError(f"{path}: {suffix} cannot keep a transparent background; use {' or '.join(keeping)}")
    return spec


class _AudioFeed:
    """The video's audio, handed out as the frames reach it. A chunked decoder (anything with `sample_rate`,
    `channels` and `chunks()`, such as studio.engine.audio_file.AudioFileStream) is pulled as it goes, never the
    whole file in memory; samples already in memory are fed as one chunk, so both take the same path."""

    def __init__(self, rate: int, channels: int, chunks) -> None:
        self.rate = int(rate)
        self.channels = channels
        self._chunks = iter(chunks)  # (n, channels) float32 arrays
        self._buffer = np.zeros((self.channels, 0), np.float32)
        self.position = 0  # samples handed out so far

    @classmethod
    def of_stream(cls, stream) -> _AudioFeed:
        rate = int(stream.sample_rate)
        if not 8000 <= rate <= 192000:
            raise ValueError(f"audio sample_rate {rate!r} is not allowed; use an integer 8000..192000 Hz")
        channels = 1 if stream.channels == 1 else 2
        return cls(rate, channels, stream.chunks(channels=channels))

    def take(self, until: int | None) -> np.ndarray:
        """(channels, n) samples from `position` up to `until` (None: to the end), fewer at the end."""
        while until is None or self.position + self._buffer.shape[1] < until:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer = np.concatenate([self._buffer, chunk.T], axis=1)
        count = self._buffer.shape[1] if until is None else max(0, min(until - self.position,
                                                                       self._buffer.shape[1]))
        out, self._buffer = self._buffer[:, :count], self._buffer[:, count:]
        self.position += count
        return out


def _check_audio(audio) -> _AudioFeed | None:
    """The audio as a feed of float32 samples in -1..1, or a ValueError saying what is wrong."""
    if audio is None:
        return None
    if hasattr(audio, "chunks"):
        return _AudioFeed.of_stream(audio)
    try:
        samples, rate = audio
    except (TypeError, ValueError):
        raise ValueError("audio must be a (samples, sample_rate) pair or None") from None
    samples = np.asarray(samples)
    if samples.dtype.kind == "i":
        samples = samples.astype(np.float32) / np.float32(np.iinfo(samples.dtype).max)
    samples = samples.astype(np.float32)
    if samples.ndim == 1:
        samples = samples[None, :]
    elif samples.ndim == 2 and samples.shape[1] in (1, 2) and samples.shape[0] > 2:
        samples = samples.T
    if samples.ndim != 2 or samples.shape[0] not in (1, 2):
        raise ValueError(f"audio samples have shape {np.shape(audio[0])}; allowed: (n,), (n, 1) or (n, 2)")
    if not isinstance(rate, (int, np.integer)) or not 8000 <= int(rate) <= 192000:
        raise ValueError(f"audio sample_rate {rate!r} is not allowed; use an integer 8000..192000 Hz")
    if not np.isfinite(samples).all():
        raise ValueError("audio samples hold NaN or infinite values")
    return _AudioFeed(int(rate), samples.shape[0], [np.clip(samples, -1.0, 1.0).T])


def render_video(
    frames: Iterable[FrameState],
    out_path: str | os.PathLike,
    fps: float = 30.0,
    size: tuple[int, int] = (1280, 720),
    audio=None,
    avatar: AvatarModel | None = None,
    background: str = "studio",
    camera: str = "body",
    crf: int = 20,
    supersample: int = 1,
) -> dict:
    """Render `frames` to a video at `out_path` (format by suffix, see VIDEO_FORMATS); returns what was written.

    Frames are shown one per 1/fps second in the order given; audio starts with the first frame. A
    transparent background keeps its alpha in .mov and .webm.
    `audio` is a (samples, sample_rate) pair, or a chunked decoder (`AudioFileStream`) read as it goes.
    """
    import av

    out_path = Path(out_path)
    width, height = (int(v) for v in size)
    if width % 2 or height % 2:
        raise ValueError(f"video size {size!r} must have even width and height (H.264 4:2:0)")
    if not 1.0 <= float(fps) <= 240.0:
        raise ValueError(f"fps {fps!r} is out of range; allowed 1..240")
    check_output_file(out_path)
    feed = _check_audio(audio)
    spec = video_format(out_path, background)
    alpha = background == "transparent"
    if avatar is None:
        from studio.avatar.io import default_avatar_path, load_avatar

        avatar = load_avatar(default_avatar_path())

    from render.offscreen import OffscreenRenderer

    rate = Fraction(float(fps)).limit_denominator(1001)
    partial = out_path.with_name(f".{out_path.name}.{os.getpid()}.partial")
    frame_count = 0
    try:
        with OffscreenRenderer(
            avatar, size=(width, height), background=background, camera=camera, supersample=supersample
        ) as renderer:
            container = av.open(str(partial), mode="w", format=spec.container, options=spec.container_options)
            try:
                video = container.add_stream(spec.codec, rate=rate)
                video.width, video.height = width, height
                video.pix_fmt = spec.alpha_pix_fmt if alpha else spec.pix_fmt
                video.options = {**spec.options, **({} if spec.codec == "prores_ks" else {"crf": str(int(crf))})}
                if spec.bt709:
                    _tag_bt709(video.codec_context)
                audio_stream = None
                if feed is not None:
                    audio_stream = container.add_stream(spec.audio_codec, rate=spec.audio_rate or feed.rate)
                    audio_stream.layout = "mono" if feed.channels == 1 else "stereo"

                for state in frames:
                    image = renderer.render(state)
                    picture = (av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgba") if alpha else
                               av.VideoFrame.from_ndarray(np.ascontiguousarray(image[..., :3]), format="rgb24"))
                    if spec.bt709:
                        picture = picture.reformat(format=spec.pix_fmt, dst_colorspace="ITU709", dst_color_range="MPEG")
                    picture.pts = frame_count
                    picture.time_base = 1 / rate
                    container.mux(video.encode(picture))
                    frame_count += 1
                    if audio_stream is not None:
                        _send_audio(container, audio_stream, feed.take(int(round(frame_count / rate * feed.rate))),
                                    feed.rate, feed.position)
                if frame_count == 0:
                    raise ValueError("no frames to render: the frame iterable was empty")
                if audio_stream is not None:
                    while (block := feed.take(feed.position + feed.rate)).shape[1]:
                        _send_audio(container, audio_stream, block, feed.rate, feed.position)
                    container.mux(audio_stream.encode(None))
                container.mux(video.encode(None))
            finally:
                container.close()
        os.replace(partial, out_path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return {
        "path": str(out_path),
        "frames": frame_count,
        "fps": float(rate),
        "duration_s": frame_count / float(rate),
        "has_audio": feed is not None,
        "audio_samples": None if feed is None else feed.position,
        "alpha": alpha,
    }


def _tag_bt709(context) -> None:
    """BT.709 primaries, transfer and matrix, limited ("tv") range, as web players expect HD video to be."""
    from av.video.reformatter import ColorPrimaries, ColorRange, Colorspace, ColorTrc

    context.color_primaries, context.color_trc = ColorPrimaries.BT709, ColorTrc.BT709
    context.colorspace, context.color_range = Colorspace.ITU709, ColorRange.MPEG


def _send_audio(container, stream, block: np.ndarray, sample_rate: int, end: int) -> None:
    """Encode the (channels, n) `block` that ends at sample `end` of the audio, in AAC-sized chunks."""
    import av

    layout = "mono" if block.shape[0] == 1 else "stereo"
    first = end - block.shape[1]
    for start in range(0, block.shape[1], _AUDIO_CHUNK):
        chunk = av.AudioFrame.from_ndarray(np.ascontiguousarray(block[:, start:start + _AUDIO_CHUNK]), format="fltp",
                                           layout=layout)
        chunk.sample_rate = sample_rate
        chunk.pts = first + start
        chunk.time_base = Fraction(1, sample_rate)
        container.mux(stream.encode(chunk))


def probe_video(path: str | os.PathLike) -> dict:
    """Decode a video back: frame count, rate, size, durations, and whether it carries audio.

    Audio duration is the stream's own (AAC decoders add priming/padding samples that are not content).
    """
    import av

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no video at {path}")
    try:
        container = av.open(str(path))
    except av.error.FFmpegError as error:
        raise ValueError(f"{path} is not a readable video file ({error})") from None
    with container:
        if not container.streams.video:
            raise ValueError(f"{path} holds no video stream")
        video = container.streams.video[0]
        audio = container.streams.audio[0] if container.streams.audio else None
        frames = 0
        decoded_samples = 0
        streams = [video] + ([audio] if audio is not None else [])
        for frame in container.decode(*streams):
            if isinstance(frame, av.VideoFrame):
                frames += 1
            else:
                decoded_samples += frame.samples
        fps = float(video.average_rate or video.guessed_rate or 0.0)
        audio_duration = None
        if audio is not None:
            audio_duration = decoded_samples / audio.rate
            if audio.duration is not None and audio.time_base is not None:
                audio_duration = min(audio_duration, float(audio.duration * audio.time_base))
        return {
            "frames": frames,
            "fps": fps,
            "width": video.codec_context.width,
            "height": video.codec_context.height,
            "duration_s": frames / fps if fps else 0.0,
            "has_audio": audio is not None,
            "audio_duration_s": audio_duration,
        }


def alpha_range(path: str | os.PathLike, max_frames: int = 5) -> tuple[int, int] | None:
    """(min, max) alpha over the first frames of a video, None when it carries no alpha channel.

    VP9 keeps alpha in a side stream that only libvpx's decoder reads, so WebM is decoded with it.
    """
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        decoder = av.codec.CodecContext.create("libvpx-vp9", "r") if stream.codec_context.name == "vp9" else None
        low, high, seen = 255, 0, 0
        for packet in container.demux(stream):
            for frame in decoder.decode(packet) if decoder is not None else packet.decode():
                if not frame.format.name.startswith(("yuva", "rgba", "bgra", "argb", "gbrap")):
                    return None
                alpha = frame.to_ndarray(format="rgba")[..., 3]
                low, high, seen = min(low, int(alpha.min())), max(high, int(alpha.max())), seen + 1
            if seen >= max_frames:
                break
        return (low, high) if seen else None
