"""Flight of the Amazon Queen's dialogue: each spoken segment found in the archive with the words it says."""

from __future__ import annotations

import struct

import pytest

from assets.model import amazon_queen, human_voices


def _line(line_id: int, text: str) -> bytes:
    raw = text.encode("latin-1")
    record = struct.pack(">hhB", 0, line_id, len(raw)) + raw
    return record + b"\0" * (-len(record) % 4)


def _dialogue(talk_key: int, person: list[tuple[int, str]], joe: list[tuple[int, str]]) -> bytes:
    """A one-level dialogue file as the game stores it: its header, the tree, Joe's lines, the person's."""
    joe_lines = b"".join(_line(i, text) for i, text in joe)
    person_offset = 32 + 96 + len(joe_lines)
    head = struct.pack(">5h6h3H", 1, 9, talk_key, len(joe), len(person), *[0] * 6, person_offset, 0, 0)
    body = head + b"\0" * (32 - len(head)) + b"\0" * 96 + joe_lines + b"".join(_line(i, t) for i, t in person)
    return b"AmBk" + b"\0" * 16 + body


def _archive(files: dict[str, bytes]) -> bytes:
    table_end = 15 + 21 * len(files)
    entries, data, offset = b"", b"", table_end
    for name, content in files.items():
        entries += struct.pack(">12sBII", name.encode("ascii"), 1, offset, len(content))
        data += content
        offset += len(content)
    return b"QTBL" + b"CEM10\0" + b"\0\0" + b"\x01" + struct.pack(">H", len(files)) + entries + data


def test_a_line_is_cut_into_one_segment_per_recording_at_its_commands():
    assert amazon_queen.segments("Ummm....*06Hi, I'm Joe King.*03") == ["Ummm....", "Hi, I'm Joe King."]
    assert amazon_queen.segments("Sorry pal.*16*02") == ["Sorry pal.", ""]
    assert amazon_queen.segments("Over here!*XY00(237,112)Come on.") == ["Over here!", "Come on."]
    assert amazon_queen.segments("No commands at all") == ["No commands at all"]


def test_each_recording_is_found_by_the_games_own_naming_and_keeps_its_words(tmp_path):
    dialogue = _dialogue(2, person=[(6, "You're asking for trouble King.*03I'm going to run you out of town.")],
                         joe=[(1, "Hi.*06Bye now."), (0x1E, "*16*02")])
    archive = tmp_path / "queen.1c"
    archive.write_bytes(_archive({"BOB1.DOG": dialogue, "020006P1.SB": b"first", "020006P2.SB": b"second",
                                  "020001J1.SB": b"hi", "02001EJ1.SB": b"silent"}))
    assert amazon_queen.spoken_lines(archive) == [
        ("amazon_queen/en/bob", "You're asking for trouble King.", b"first"),
        ("amazon_queen/en/bob", "I'm going to run you out of town.", b"second"),
        ("amazon_queen/en/joe", "Hi.", b"hi"),
    ]  # "Bye now." has no recording; the command-only line speaks no words
    (tmp_path / "lines").mkdir()
    items = amazon_queen.extract(tmp_path / "lines", archive)
    assert [(speaker, path.read_bytes(), words) for speaker, path, words in items][0] == (
        "amazon_queen/en/bob", b"first", "You're asking for trouble King.")


def test_a_file_that_is_not_the_games_archive_gets_a_clear_error(tmp_path):
    with pytest.raises(amazon_queen.ArchiveError, match="QTBL"):
        amazon_queen.read_table(b"RIFF\0\0\0\0WAVE")
    truncated = _archive({"BOB1.DOG": b"x" * 64})[:-10]
    with pytest.raises(amazon_queen.ArchiveError, match="BOB1.DOG"):
        amazon_queen.read_table(truncated)


def test_words_are_spelled_as_the_cmu_dictionary_lists_them():
    assert amazon_queen.dictionary_words("Hi, I'm Joe King.") == ["hi", "i'm", "joe", "king"]
    assert amazon_queen.dictionary_words("'Scuse me... \"SERIOUS\" trouble!") == ["scuse", "me", "serious", "trouble"]


def test_the_installed_game_gives_thousands_of_lines_from_dozens_of_characters():
    lines = amazon_queen.spoken_lines()
    speakers = {speaker for speaker, _, _ in lines}
    assert len(lines) > 3700 and len(speakers) > 25
    assert ("amazon_queen/en/and", "I'm going to run you out of town.") in {(s, w) for s, w, _ in lines}
    assert all(mp3[:2] == b"\xff\xe3" for _, _, mp3 in lines[:50])  # MPEG audio frames, as the table says


def test_english_lines_are_aligned_by_the_dictionary_and_pass_the_dev_sets_qc(tmp_path):
    items = [item for item in amazon_queen.extract(tmp_path) if item[0] == "amazon_queen/en/and"][:12]
    clips, summary = human_voices.load_clips(items, log=lambda *_: None, workers=1)
    assert summary["clips"] >= 6 and summary["speakers"] == ["amazon_queen/en/and"]
    town = next(clip for clip in clips if clip.text == "I'm going to run you out of town.")
    spoken = [phone for phone, _, _ in town.phones if phone != "SIL"]
    assert spoken[:3] == ["AY", "M", "G"] and "UW" in spoken
    assert all(start < end for _, start, end in town.phones)
