"""A live recorder in its own process, for the kill test: the engine plays a file at real-time pace
(without sound) into a take, printing the media time of every frame it emits until it is killed.

    python -m tests.studio.recording.live_recorder AUDIO TAKE_DIR
"""

from __future__ import annotations

import sys

from studio.avatar.io import default_avatar_path, load_avatar
from studio.engine.pipeline import Engine
from studio.engine.sources import ENGINE_RATE, FileSource
from studio.recording.recorder import TakeRecorder, take_manifest


def main(audio: str, folder: str) -> None:
    engine = Engine(fps=30)
    printed = engine.subscribe(10_000)
    recorder = TakeRecorder(folder, take_manifest("default", "default", load_avatar(default_avatar_path()), ENGINE_RATE, 30),
                            engine.subscribe())
    recorder.start()
    engine.listen_audio(recorder.add_audio)
    engine.set_source(FileSource(audio, play=False, realtime=True))
    engine.start()
    while True:
        frame = printed.get(timeout=0.5)
        if frame is not None:
            print(f"frame {frame.media_time_s:.6f}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
