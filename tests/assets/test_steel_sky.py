"""Beneath a Steel Sky's dialogue: each recording found with its words, unpacked and checked, as the game reads them."""

from __future__ import annotations

import struct
import wave

import pytest

from assets.model import steel_sky


class _BitWriter:
    """Writes an RNC method 1 bit stream: bits low first into 16-bit words, literal bytes after the word
    being filled (a word is begun only when a bit needs it, as the reader loads one)."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.word_at: int | None = None
        self.used = 16

    def bits(self, value: int, n: int) -> None:
        for i in range(n):
            if self.used == 16:
                self.word_at, self.used = len(self.out), 0
                self.out += b"\0\0"
            if value >> i & 1:
                self.out[self.word_at + self.used // 8] |= 1 << self.used % 8
            self.used += 1

    def literal(self, data: bytes) -> None:
        self.out += data


def _flat_table(writer: _BitWriter) -> None:
    """A Huffman table of 16 symbols, every code 4 bits long: symbol s is s's four bits reversed."""
    writer.bits(16, 5)
    for _ in range(16):
        writer.bits(4, 4)


def _number(writer: _BitWriter, value: int) -> None:
    symbol = value if value < 2 else value.bit_length()
    writer.bits(int(f"{symbol:04b}"[::-1], 2), 4)
    if symbol >= 2:
        writer.bits(value - (1 << symbol - 1), symbol - 1)


def _rnc(tokens: list[tuple[bytes, tuple[int, int] | None]]) -> bytes:
    """An RNC method 1 pack of one chunk: each token a literal run and, but for the last, a copy (distance,
    length)."""
    writer, unpacked = _BitWriter(), bytearray()
    writer.bits(0, 2)
    for _ in range(3):
        _flat_table(writer)
    writer.bits(len(tokens), 16)
    for run, copy in tokens:
        _number(writer, len(run))
        writer.literal(run)
        unpacked += run
        if copy:
            distance, length = copy
            _number(writer, distance - 1)
            _number(writer, length - 2)
            for _ in range(length):
                unpacked.append(unpacked[-distance])
    header = b"RNC\x01" + struct.pack(">IIHH", len(unpacked), len(writer.out), steel_sky.crc16(unpacked),
                                      steel_sky.crc16(writer.out)) + b"\0\x01"
    return header + bytes(writer.out)


def test_an_rnc_pack_unpacks_literal_runs_and_overlapping_copies():
    packed = _rnc([(b"ab", (2, 6)), (b"X", (1, 3)), (b"yz", None)])
    assert steel_sky.rnc_unpack(packed) == b"abababab" + b"XXXX" + b"yz"


def test_a_damaged_pack_is_refused_by_its_crc_not_unpacked_wrong():
    packed = bytearray(_rnc([(b"hello", (5, 5)), (b"!", None)]))
    packed[-1] ^= 0x20  # inside the last literal run
    with pytest.raises(steel_sky.DataError, match="CRC"):
        steel_sky.rnc_unpack(bytes(packed))
    with pytest.raises(steel_sky.DataError, match="RNC"):
        steel_sky.rnc_unpack(b"PK\x03\x04" + bytes(20))


_TREE_CHARACTERS = b"\0 .?'" + bytes(range(65, 91)) + bytes(range(97, 123))


def _tree(characters: bytes) -> bytes:
    """A Huffman tree as the interpreter stores it: (left, right, character) triples, node 0 the root,
    children after their parent; leaves in `characters`' order, codes a balanced split."""
    nodes: list[list[int]] = []

    def build(leaves: bytes) -> int:
        at = len(nodes)
        nodes.append([0, 0, 0])
        if len(leaves) == 1:
            nodes[at][2] = leaves[0]
        else:
            half = len(leaves) // 2
            nodes[at][0] = build(leaves[:half])
            nodes[at][1] = build(leaves[half:])
        return at

    build(characters)
    return b"".join(bytes(node) for node in nodes)


def _codes(tree: bytes) -> dict[int, str]:
    codes, pending = {}, [(0, "")]
    while pending:
        node, path = pending.pop()
        left, right, character = tree[3 * node:3 * node + 3]
        if left == right == 0:
            codes[character] = path
        else:
            pending += [(left, path + "0"), (right, path + "1")]
    return codes


def _text_file(lines: list[str], tree: bytes) -> bytes:
    """A section's text file: the two offsets, one block's length, each line's length in 2-bit units, the bits."""
    codes = _codes(tree)
    bits = ""
    lengths = []
    for line in lines:
        coded = "".join(codes[c] for c in line.encode("latin-1") + b"\0")
        coded += "0" * (-len(coded) % 2)
        lengths.append(len(coded) // 2)
        bits += coded
    bits += "0" * (-len(bits) % 8 + 16)
    table = bytes(lengths)
    head = struct.pack("<HHH", 6, 6 + len(table), sum(lengths))
    return head + table + int(bits, 2).to_bytes(len(bits) // 8, "big")


def _game(folder, files: dict[int, tuple[bytes, bool]]):
    """sky.dnr and sky.dsk holding `files` (number → (bytes, stored as is)), offsets in 16-byte units."""
    disk, table = bytearray(), bytearray(struct.pack("<I", len(files)))
    for number, (data, stored) in files.items():
        disk += b"\0" * (-len(disk) % 16)
        offset = len(disk) >> 4 | 1 << 23
        table += struct.pack("<H", number) + offset.to_bytes(3, "little")
        table += (len(data) | stored << 23).to_bytes(3, "little")
        disk += data
    (folder / "sky.dnr").write_bytes(bytes(table))
    (folder / "sky.dsk").write_bytes(bytes(disk))


def _speech(pcm: bytes) -> bytes:
    """A recording as the game packs it: its 22-byte header (flag bit 7: packed), then the RNC pack."""
    header = struct.pack("<11H", 0x80, 0, 0, 0, 0, 0, len(pcm) + 22, 0, 0, 0, 0)
    return header + _rnc([(pcm[:10], (10, len(pcm) - 10)), (b"", None)])


def test_each_line_with_a_recording_is_found_with_its_words_and_falls_to_the_test_or_training_part(tmp_path):
    right = _tree(_TREE_CHARACTERS)
    wrong = _tree(_TREE_CHARACTERS[:2] + _TREE_CHARACTERS[2:][::-1])  # same shape, characters shuffled
    interpreter = tmp_path / "scummvm"
    interpreter.write_bytes(b"\x7fELF" + bytes(100) + wrong + bytes(7) + right + b"more code")
    lines = ["Foster", "Why ASK me then?", "Hello? Who IS this?", "I can SENSE its presence..."]
    pcm = bytes([0x80, 0x90, 0xA0, 0x90, 0x80, 0x70, 0x60, 0x70, 0x80, 0x80]) * 30
    _game(tmp_path, {60600: (_text_file(lines, right), True), 50001: (_speech(pcm), False),
                     50003: (_speech(pcm[::-1]), False), 60150: (b"font", True)})
    assert len(steel_sky.huffman_trees(interpreter.read_bytes())) == 2
    found = steel_sky.read_lines(tmp_path, interpreter)
    assert found == [("Why ASK me then?", pcm), ("I can SENSE its presence...", pcm[::-1])]
    (tmp_path / "out").mkdir()
    items = steel_sky.extract(tmp_path / "out", tmp_path, interpreter)
    assert [(speaker, words) for speaker, _, words in items] == [(steel_sky.SPEAKER, w) for w, _ in found]
    with wave.open(str(items[0][1])) as recording:
        assert (recording.getframerate(), recording.getsampwidth(), recording.getnframes()) == (11025, 1, len(pcm))
        assert recording.readframes(len(pcm)) == pcm
    for part in ("test", "train"):
        (tmp_path / part).mkdir()
    test = steel_sky.extract(tmp_path / "test", tmp_path, interpreter, part="test", trained_elsewhere=frozenset())
    train = steel_sky.extract(tmp_path / "train", tmp_path, interpreter, part="train", trained_elsewhere=frozenset())
    assert [words for _, _, words in test] == ["Why ASK me then?"]  # the first of every TEST_EVERY lines
    assert [words for _, _, words in train] == ["I can SENSE its presence..."]
    with pytest.raises(ValueError, match="'dev'.*allowed"):
        steel_sky.extract(tmp_path / "out", tmp_path, interpreter, part="dev")


def test_a_missing_game_is_unavailable_and_a_cut_file_table_is_refused_by_its_count(tmp_path):
    assert not steel_sky.available(tmp_path, tmp_path / "scummvm")
    (tmp_path / "sky.dnr").write_bytes(struct.pack("<I", 3))
    (tmp_path / "sky.dsk").write_bytes(b"")
    with pytest.raises(steel_sky.DataError, match="3 entries"):
        steel_sky.read_index((tmp_path / "sky.dnr").read_bytes())


def test_a_test_line_whose_words_a_training_line_also_says_trains_instead():
    texts = ["What?", "Hello there.", "what...", "Go away!", "FOOD!", "Never mind...", "Sorry!", "x", "y", "z",
             "Never MIND!", "Good."]
    # on the grid: 0 "What?" (also said at 2), 5 "Never mind..." (only at 10, also on the grid), 10
    assert steel_sky.test_numbers(texts) == {5, 10}
    assert steel_sky.test_numbers(texts, trained_elsewhere=frozenset({"never mind"})) == set()
    assert steel_sky.spoken_words("I don't KNOW!") == "i don't know"
