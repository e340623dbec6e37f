"""Beneath a Steel Sky's spoken dialogue: English connected speech acted by a cast of real people.

Debian's `beneath-a-steel-sky` (freeware: free to share and to modify, marked as modified) ships the CD
("talkie") release, v0.0372: `sky.dnr`, a table of the files in `sky.dsk`, and `sky.dsk` itself. Every line
of the game has a text number (section << 12 | line); its words are in the section's text file (60600 +
section for English) and its recording, where it has one, in file 50000 + the section's first file + line:
8-bit unsigned PCM at 11,025 Hz after a 22-byte header, packed by Rob Northen's compressor (RNC method 1).

Table entry (8 bytes, little-endian): the file's number, 3 bytes of offset (bit 23: the offset counts
16-byte units) and 3 bytes of size and flags (bit 23: stored as is; otherwise the header's flag bit 7 says
that the rest is RNC-packed).

An RNC method 1 stream: "RNC\\x01", the unpacked and packed sizes and the CRC-16 of each (big-endian), then
a bit stream read from little-endian 16-bit words, low bit first, in chunks: three Huffman tables (their
code lengths: 5 bits for how many, 4 bits each), a 16-bit count, and that many runs of literal bytes (a
length, then the bytes themselves, taken whole from the byte stream at the next unread word) each but the
last followed by a copy from earlier output (its distance and length). A coded number is its bit length n
followed by its n - 1 lower bits.

A text file starts with two offsets: the table of each line's length (in 2-bit units; a byte, or with bit
7 set, its low bits times 8) and the start of the bits, then each block of 32 lines' total length. The
words are Huffman-coded, high bit first, one character a symbol, ended by a zero. The Huffman tree is not
in the game's files: the game's own interpreter, ScummVM (which Debian installs with the game), holds it
as an array of (left child, right child, character) bytes. `huffman_trees` finds every such array in the
ScummVM binary by its shape alone, and `read_lines` keeps the one whose English reads cleanly.

Use: four of every five lines are training speech (`human_voices`, in `make model`'s corpus); the fifth are
a test of unheard English sentences in the cast's voices, scored as the human dev set is
(`python -m assets.model.steel_sky`; the experiment log, twentieth and twenty-first rounds).
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import tempfile
import wave
from pathlib import Path

import numpy as np

SKY_DATA = Path("/usr/share/scummvm/beneath-a-steel-sky")
SCUMMVM = Path("/usr/games/scummvm")
SAMPLE_RATE = 11025
SPEAKER = "steel_sky/en/cast"
"""The lines do not say who speaks them: Foster, Joey and the city's people share one name."""

_SPEECH_BASE = 50000
_TEXT_BASE = 60600
_SECTION_FIRST_FILE = (0, 600, 1100, 2430, 3380, 4530, 5080, 5230)
"""Each section's first recording, counted from `_SPEECH_BASE` (as the game numbers them)."""
_HEADER = 22
TEST_EVERY = 5
"""Every fifth line (by its place in `read_lines`) is a test line, unless its words are also spoken by a training
line (see `test_numbers`): never trained on, and the lines `aligned_sample` draws. The cast is the same on both
sides, so the test lines are unheard sentences in heard voices."""
_READABLE = re.compile(r"[A-Za-z0-9 .,'!?:;()\"-]")
_CAPITAL_INSIDE = re.compile(r"[a-z][A-Z]")


class DataError(ValueError):
    """A file of the game that this reader cannot read."""


def read_index(table: bytes) -> dict[int, tuple[int, int, bool]]:
    """File number → (offset, size, stored as is) from `sky.dnr`'s bytes."""
    if len(table) < 4:
        raise DataError("the file table is shorter than its count")
    count = struct.unpack_from("<I", table, 0)[0]
    if len(table) < 4 + 8 * count:
        raise DataError(f"the file table states {count} entries but holds {(len(table) - 4) // 8}")
    index = {}
    for start in range(4, 4 + 8 * count, 8):
        number = struct.unpack_from("<H", table, start)[0]
        offset = int.from_bytes(table[start + 2:start + 5], "little")
        flags = int.from_bytes(table[start + 5:start + 8], "little")
        if offset >> 23 & 1:
            offset = (offset & 0x7FFFFF) << 4
        index[number] = (offset, flags & 0x3FFFFF, bool(flags >> 23 & 1))
    return index


def read_file(disk: bytes, index: dict[int, tuple[int, int, bool]], number: int) -> bytes:
    """File `number` of `disk`, unpacked; a packed file loses its 22-byte header."""
    offset, size, stored = index[number]
    data = disk[offset:offset + size]
    if len(data) != size:
        raise DataError(f"file {number} runs past the end of the disk")
    if stored or not (struct.unpack_from("<H", data, 0)[0] >> 7 & 1) or data[_HEADER:_HEADER + 4] != b"RNC\x01":
        return data
    return rnc_unpack(data[_HEADER:])


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = crc >> 1 ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC = _crc_table()


def crc16(data: bytes) -> int:
    """The CRC-16 (polynomial 0xA001, reflected) that RNC stores for its packed and unpacked bytes."""
    crc = 0
    for byte in data:
        crc = crc >> 8 ^ _CRC[(crc ^ byte) & 0xFF]
    return crc


class _Bits:
    """The bit stream of an RNC method 1 pack: words loaded as bits are needed, literal bytes read in between."""

    def __init__(self, data: bytes, position: int) -> None:
        self.data, self.position, self.held, self.count = data, position, 0, 0

    def _word(self) -> int:
        """The next word; past the end, zeros (the last codes are peeked 16 bits at a time, and the packer
        does not pad): a stream cut short fails the length and CRC check instead."""
        return int.from_bytes(self.data[self.position:self.position + 2].ljust(2, b"\0"), "little")

    def peek16(self) -> int:
        if self.count >= 16:
            return self.held & 0xFFFF
        return (self.held | self._word() << self.count) & 0xFFFF

    def read(self, n: int) -> int:
        if n > self.count:
            self.held |= self._word() << self.count
            self.count += 16
            self.position += 2
        value = self.held & (1 << n) - 1
        self.held >>= n
        self.count -= n
        return value

    def literal(self, n: int) -> bytes:
        data = self.data[self.position:self.position + n]
        if len(data) < n:
            raise DataError("the packed stream ends inside a literal run")
        self.position += n
        return data


def _huffman_table(bits: _Bits) -> tuple[dict[tuple[int, int], int], list[int]]:
    """(code length, code read low bit first) → symbol, and the lengths in use, shortest first."""
    lengths = [bits.read(4) for _ in range(bits.read(5))]
    codes, code = {}, 0
    for length in range(1, 17):
        for symbol, own in enumerate(lengths):
            if own == length:
                codes[(length, int(f"{code >> 16 - length:0{length}b}"[::-1], 2))] = symbol
                code += 1 << 16 - length
    return codes, sorted({length for length, _ in codes})


def _coded_number(bits: _Bits, table: tuple[dict[tuple[int, int], int], list[int]]) -> int:
    codes, lengths = table
    peeked = bits.peek16()
    for length in lengths:
        symbol = codes.get((length, peeked & (1 << length) - 1))
        if symbol is not None:
            break
    else:
        raise DataError("a Huffman code that is in no table")
    bits.read(length)
    return 1 << symbol - 1 | bits.read(symbol - 1) if symbol >= 2 else symbol


def rnc_unpack(packed: bytes) -> bytes:
    """The bytes an RNC method 1 pack holds, checked against its stored length and CRC."""
    if packed[:4] != b"RNC\x01" or len(packed) < 18:
        raise DataError("not an RNC method 1 pack")
    size, _packed_size, crc = struct.unpack_from(">IIH", packed, 4)
    bits = _Bits(packed, 18)
    bits.read(2)
    out = bytearray()
    for _ in range(packed[17]):
        literals, distances, lengths = _huffman_table(bits), _huffman_table(bits), _huffman_table(bits)
        for remaining in range(bits.read(16), 0, -1):
            run = _coded_number(bits, literals)
            if run:
                out += bits.literal(run)
            if remaining > 1:
                distance = _coded_number(bits, distances) + 1
                length = _coded_number(bits, lengths) + 2
                if distance > len(out):
                    raise DataError("a copy from before the start of the output")
                start = len(out) - distance
                if distance >= length:
                    out += out[start:start + length]
                else:
                    for step in range(length):
                        out.append(out[start + step])
    if len(out) != size or crc16(out) != crc:
        raise DataError(f"unpacked {len(out)} bytes that do not match the pack's length ({size}) and CRC")
    return bytes(out)


Tree = list[tuple[int, int, int]]


def _tree_at(binary: bytes, start: int) -> Tree | None:
    """The Huffman tree stored as (left, right, character) triples from `start`, if the bytes form one: every
    node reached once, children after their parent, leaves with distinct characters among them a space and
    the terminating zero."""
    nodes: dict[int, tuple[int, int, int]] = {}
    pending = [0]
    while pending:
        node = pending.pop()
        at = start + 3 * node
        if node in nodes or at + 3 > len(binary):
            return None
        left, right, character = binary[at:at + 3]
        if left == right == 0:
            nodes[node] = (0, 0, character)
            continue
        if character or left <= node or right <= node or left == right:
            return None
        nodes[node] = (left, right, 0)
        pending += [left, right]
    if sorted(nodes) != list(range(len(nodes))) or len(nodes) < 63:
        return None
    leaves = [character for left, right, character in nodes.values() if left == right == 0]
    if len(set(leaves)) != len(leaves) or not {0, 0x20} <= set(leaves):
        return None
    return [nodes[node] for node in range(len(nodes))]


def huffman_trees(binary: bytes) -> list[Tree]:
    """Every text Huffman tree in a ScummVM binary (one per release of the game), found by shape: the candidates
    are where a root (1, r, 0) is followed by an inner node (2, r', 0), as every release's tree starts."""
    return [tree for found in re.finditer(rb"\x01[\x02-\xff]\x00\x02[\x03-\xff]\x00", binary)
            if (tree := _tree_at(binary, found.start())) is not None]


def text_line(section: bytes, tree: Tree, line: int, longest: int = 400) -> str | None:
    """Line `line` of a section's text file, or None when it does not decode to a zero-ended string."""
    try:
        lengths_at, bits_at = struct.unpack_from("<HH", section, 0)
        block = line & 0xFE0
        offset = sum(struct.unpack_from(f"<{block >> 5}H", section, 4))
        for skip in section[lengths_at + block:lengths_at + block + (line & 0x1F)]:
            offset += (skip & 0x7F) << 3 if skip & 0x80 else skip
        byte, bit = bits_at + (offset >> 2), ((offset & 3 ^ 3) + 1) * 2
        characters = []
        while len(characters) < longest:
            node = 0
            while True:
                if bit:
                    bit -= 1
                else:
                    byte, bit = byte + 1, 7
                node = tree[node][section[byte] >> bit & 1]  # 0: left, 1: right
                if tree[node][0] == tree[node][1] == 0:
                    break
            if tree[node][2] == 0:
                return bytes(characters).decode("latin-1")
            characters.append(tree[node][2])
    except (IndexError, struct.error):
        return None
    return None


def _unreadable(text: str | None) -> int:
    """Characters no line of dialogue holds, and capitals straight after a small letter ("MdHroSB")."""
    return 1000 if text is None else len(_READABLE.sub("", text)) + len(_CAPITAL_INSIDE.findall(text))


def read_lines(root: Path = SKY_DATA, scummvm: Path = SCUMMVM) -> list[tuple[str, bytes]]:
    """(words, 8-bit unsigned PCM at 11,025 Hz) of every English line that has a recording.

    Of the Huffman trees in `scummvm`, the one whose English lines decode with the fewest characters that no
    line of dialogue holds and the fewest capitals inside words (the right tree's count is near zero; a wrong
    one's runs into the hundreds)."""
    try:
        index = read_index((root / "sky.dnr").read_bytes())
        disk = (root / "sky.dsk").read_bytes()
        trees = huffman_trees(scummvm.read_bytes())
    except OSError as error:
        raise DataError(str(error)) from error
    if not trees:
        raise DataError(f"{scummvm} holds no text Huffman tree")
    spoken = []
    for section, first in enumerate(_SECTION_FIRST_FILE):
        if _TEXT_BASE + section not in index:
            continue
        section_text = read_file(disk, index, _TEXT_BASE + section)
        lengths_at, bits_at = struct.unpack_from("<HH", section_text, 0)
        lines = [line for line in range(max(0, bits_at - lengths_at)) if _SPEECH_BASE + first + line in index]
        spoken += [(section_text, _SPEECH_BASE + first + line, line) for line in lines]
    sample = spoken[::10]
    tree = min(trees, key=lambda candidate: sum(_unreadable(text_line(section_text, candidate, line))
                                                for section_text, _, line in sample))
    found = []
    for section_text, recording, line in spoken:
        words = text_line(section_text, tree, line)
        if words and re.search(r"[A-Za-z]", words) and not _unreadable(words):
            try:
                found.append((words, read_file(disk, index, recording)))
            except DataError:
                continue
    return found


def spoken_words(text: str) -> str:
    """A line's words as the aligner spells them (lower case, no punctuation): lines that say the same match."""
    from assets.model.amazon_queen import dictionary_words

    return " ".join(dictionary_words(text))


def other_training_words() -> frozenset[str]:
    """The words of every line of the other English game that trains the model (Flight of the Amazon Queen, where
    it is installed and readable): a test line must not say any of them."""
    from assets.model import amazon_queen

    if not amazon_queen.QUEEN_ARCHIVE.is_file():
        return frozenset()
    try:
        return frozenset(spoken_words(words) for _, words, _ in amazon_queen.spoken_lines())
    except (OSError, amazon_queen.ArchiveError):
        return frozenset()


def test_numbers(texts: list[str], trained_elsewhere: frozenset[str] = frozenset()) -> set[int]:
    """The places of the test lines among `texts` (every line, in `read_lines` order): every TEST_EVERY-th line,
    less those whose words another line off that grid, or `trained_elsewhere`, also says ("What?", "Never
    mind..."). Those train instead, so no sentence of the test lines is ever trained on."""
    words = [spoken_words(text) for text in texts]
    grid = {number for number in range(len(words)) if number % TEST_EVERY == 0}
    trained = {said for number, said in enumerate(words) if number not in grid} | trained_elsewhere
    return {number for number in grid if words[number] not in trained}


def extract(folder: Path, root: Path = SKY_DATA, scummvm: Path = SCUMMVM,
            part: str = "all", trained_elsewhere: frozenset[str] | None = None) -> list[tuple[str, Path, str]]:
    """Write each spoken line of `part` ("all", "train" or "test": see `test_numbers`) as a WAV file into
    `folder`; (speaker, path, words) of each. `trained_elsewhere`: other training lines' words (default
    `other_training_words()`)."""
    if part not in ("all", "train", "test"):
        raise ValueError(f"part {part!r}: allowed are 'all', 'train' and 'test'")
    lines = read_lines(root, scummvm)
    if trained_elsewhere is None:
        trained_elsewhere = other_training_words() if part != "all" else frozenset()
    test = test_numbers([words for words, _ in lines], trained_elsewhere)
    items = []
    for number, (words, pcm) in enumerate(lines):
        if part != "all" and (number in test) != (part == "test"):
            continue
        path = folder / f"{number:05d}.wav"
        with wave.open(str(path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(1)
            out.setframerate(SAMPLE_RATE)
            out.writeframes(pcm)
        items.append((SPEAKER, path, words))
    return items


def available(root: Path = SKY_DATA, scummvm: Path = SCUMMVM) -> bool:
    return (root / "sky.dsk").is_file() and (root / "sky.dnr").is_file() and scummvm.is_file()


def aligned_sample(count: int, seed: int = 0, log=print) -> list:
    """`count` test lines drawn at random (`seed`), spelled and aligned as the training lines are
    (`human_voices`: the CMU dictionary, pocketsphinx and the dev set's QC); lines with a word the dictionary
    lacks, or that fail QC, are left out."""
    from assets.model.human_voices import align_all

    with tempfile.TemporaryDirectory(prefix="steel-sky-") as folder:
        items = extract(Path(folder), part="test")
        drawn = np.random.default_rng(seed).choice(len(items), min(count, len(items)), replace=False)
        clips, unspelled, dropped = align_all([items[index] for index in sorted(drawn)])
    log(f"steel sky: {len(clips)} of {len(drawn)} lines aligned ({dropped} dropped by QC, "
        f"{unspelled} with a word not in the dictionary)")
    return clips


def score(models: Path | None = None, count: int = 600, seed: int = 0, log=print) -> dict:
    """Articulation of what users see (`live_engine`: the live engine from the audio; `lipsync`: the offline
    analysis) on `count` of the game's lines, for the face models in the folder `models` (default: shipped)."""
    from assets.model import evaluate
    from assets.model.human_dev import SAMPLE_RATE as DEV_RATE
    from assets.model.human_dev import to_examples
    from studio.engine.face_model import VARIANTS, default_model_path

    clips = aligned_sample(count, seed, log)
    examples = to_examples(clips)
    paths = None
    if models is not None:
        named = {variant: models / default_model_path(variant).name for variant in VARIANTS}
        paths = {variant: path for variant, path in named.items() if path.is_file()}
    rows = {"live_engine": evaluate.LiveEngine("fp32", evaluate.model_paths(paths)["fp32"]),
            "lipsync": evaluate.lipsync_pipeline(paths)}
    report: dict = {"clips": len(clips), "audio_s": round(sum(len(c.audio) for c in clips) / DEV_RATE, 1)}
    for name, row in rows.items():
        report[name] = evaluate.articulation_metrics(row, examples)
        report[f"{name}_by_phone"] = evaluate.human_breakdown(row, clips, examples)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description="score the face models on Beneath a Steel Sky's English dialogue")
    parser.add_argument("--models", type=Path, help="folder of face_fp32.onnx (and face_offline.onnx); default shipped")
    parser.add_argument("--lines", type=int, default=600, help="how many lines to draw (default 600)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the report here as JSON")
    args = parser.parse_args()
    if not available():
        parser.error(f"{SKY_DATA} or {SCUMMVM} is missing: apt-get install beneath-a-steel-sky")
    report = score(args.models, args.lines, args.seed)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if not k.endswith("_by_phone")}, indent=2))


if __name__ == "__main__":
    main()
