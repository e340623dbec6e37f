"""Flight of the Amazon Queen's spoken dialogue: English connected speech acted by a cast of real people.

Debian's `flight-of-the-amazon-queen` (freeware licence: free to share and modify) ships the CD ("talkie")
release as one archive, `queen.1c`: a table of files, among them each conversation's dialogue file (`.DOG`,
the lines as text) and each spoken line (`.SB`, MP3 at 11 kHz). Joe King, the hero, and about forty other
characters speak the lines: whole sentences, questions and exclamations, as users talk.

The archive's table: "QTBL", a 6-byte version, two flag bytes, the compression (1: MP3) and the number of
entries, then per entry a 12-byte name, its bundle number and the big-endian offset and size. A dialogue
file (after its 20-byte "AmBk" header) starts with the number of levels, two keys, how many lines Joe and
the other person have, three conditions and the offsets of the person's and Joe's lines. Each line is an
id and a length-prefixed string padded to 4 bytes; `*` and two characters (or `*XY` and eleven more) cut a
line into segments, one recording each. The game names a segment's recording from the conversation's
talk key, the line's id in hex, who speaks it (J or P) and the segment's number, spaces read as zeros:
"02" "0006" "P" "2" is "020006P2.SB", "I'm going to run you out of town.".
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

QUEEN_ARCHIVE = Path("/usr/share/scummvm/flight-of-the-amazon-queen/queen.1c")
_TABLE_START = 15
_ENTRY = struct.Struct(">12sBII")
_DOG_HEADER = 20
_COMMAND = re.compile(r"\*(XY.{11}|..)", re.DOTALL)


class ArchiveError(ValueError):
    """The file is not a Flight of the Amazon Queen archive this reader understands."""


def read_table(data: bytes) -> dict[str, tuple[int, int]]:
    """Each file's name → (offset, size) in the archive `data`."""
    if data[:4] != b"QTBL" or len(data) < _TABLE_START:
        raise ArchiveError("not a Flight of the Amazon Queen archive (no QTBL table)")
    count = struct.unpack_from(">H", data, 13)[0]
    table = {}
    for index in range(count):
        raw, _bundle, offset, size = _ENTRY.unpack_from(data, _TABLE_START + index * _ENTRY.size)
        if offset + size > len(data):
            raise ArchiveError(f"entry {index} ({raw!r}) runs past the archive's end")
        table[raw.split(b"\0")[0].decode("ascii", "replace")] = (offset, size)
    return table


def _lines(dialogue: bytes, offset: int, count: int) -> list[tuple[int, str]]:
    lines = []
    for _ in range(count):
        line_id = struct.unpack_from(">h", dialogue, offset + 2)[0]
        length = dialogue[offset + 4]
        start = offset + 5
        lines.append((line_id, dialogue[start:start + length].decode("latin-1")))
        offset = (start + length + 3) & ~3 if length else start
    return lines


def segments(line: str) -> list[str]:
    """A line's spoken segments, in order (the text between its `*` commands; one recording each)."""
    parts = _COMMAND.split(line)[::2]
    return parts[:-1] if parts and parts[-1] == "" else parts


def dialogue_segments(dialogue: bytes) -> list[tuple[str, str, str]]:
    """(recording name, J or P, words) of every spoken segment of one dialogue file (its header dropped)."""
    levels, _unique, talk_key, joe_count, person_count = struct.unpack_from(">5h", dialogue, 0)
    person_offset = struct.unpack_from(">H", dialogue, 22)[0]
    joe_offset = 32 + abs(levels) * 96
    found = []
    for who, offset, count in (("P", person_offset, person_count), ("J", joe_offset, joe_count)):
        for line_id, line in _lines(dialogue, offset, count):
            for index, words in enumerate(segments(line)):
                name = f"{talk_key:2d}{line_id & 0xFFFF:4x}{who}".replace(" ", "0") + f"{index + 1:x}"
                found.append((name.upper() + ".SB", who, words))
    return found


def _character(dialogue_name: str) -> str:
    """The person a dialogue file talks to, its numbering dropped: BOB1.DOG and BOB5.DOG are both Bob."""
    return re.sub(r"\d+$", "", dialogue_name.removesuffix(".DOG")).lower() or "unknown"


def spoken_lines(archive: Path = QUEEN_ARCHIVE) -> list[tuple[str, str, memoryview]]:
    """(speaker, words, MP3 bytes) of every dialogue segment that has a recording; Joe's lines are
    speaker "amazon_queen/en/joe", the other person's "amazon_queen/en/<character>". The MP3s are
    views into the archive's bytes, not copies (there are 33 MB of them)."""
    data = archive.read_bytes()
    table = read_table(data)
    view = memoryview(data)
    found = []
    for name in sorted(table):
        if not name.endswith(".DOG"):
            continue
        offset, size = table[name]
        try:
            spoken = dialogue_segments(data[offset + _DOG_HEADER:offset + size])
        except (struct.error, IndexError):
            continue
        for recording, who, words in spoken:
            if recording in table and re.search(r"[A-Za-z]", words):
                start, length = table[recording]
                speaker = "joe" if who == "J" else _character(name)
                found.append((f"amazon_queen/en/{speaker}", words, view[start:start + length]))
    return found


def extract(folder: Path, archive: Path = QUEEN_ARCHIVE) -> list[tuple[str, Path, str]]:
    """Write each spoken segment's MP3 into `folder`; (speaker, path, words) of each."""
    items = []
    for index, (speaker, words, mp3) in enumerate(spoken_lines(archive)):
        path = folder / f"{index:05d}.mp3"
        path.write_bytes(mp3)
        items.append((speaker, path, words))
    return items


def dictionary_words(text: str) -> list[str]:
    """The words of a line as the CMU dictionary spells them: lower case, letters and inner apostrophes."""
    return [word.strip("'") for word in re.findall(r"[a-z']+", text.lower()) if word.strip("'")]
