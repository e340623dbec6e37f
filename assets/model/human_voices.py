"""Training speech from real people: the recordings that Debian's education and game packages ship.

The synthetic corpus never shows how a real mouth sounds: a /b/ voiced before its release, an /m/ murmur
that fades, a vowel that dies away into a pause. Debian ships thousands of real recordings whose words
are known, most of them in languages other than English. Lips close for p/b/m and round for o/u/y the same
way in every language, so these voices teach the face model what human closures and rounding sound like,
while the English recordings of the same packages stay in the human dev set (`human_dev`), never trained on:

- `tuxpaint-stamps-default` (GPL-2): the spoken descriptions of the stamps in French, Russian, Romanian,
  Catalan, Bulgarian, Spanish, Belarusian, Greek, Danish, Lithuanian and Dutch
  (`/usr/share/tuxpaint/stamps/**/*_desc_<language>.ogg`), the words from that language's line in the
  stamp's `.txt`;
- `klettres-data` (GPL-2+): letters and syllables read by native speakers of thirteen languages
  (`/usr/share/klettres/<language>/{alpha,syllab}/*.ogg`), the text from the language's `sounds.xml`;
- `fillets-ng-data-cs` and `fillets-ng-data-nl` (GPL-2), with `fillets-ng-data` for the words: Fish Fillets'
  spoken dialogue, acted in Czech and in Dutch (`/usr/share/games/fillets-ng/sound/<level>/<language>/*.ogg`,
  the words from `script/<level>/dialogs_<language>.lua`): whole sentences of connected speech, two main voices
  per language and two dozen minor ones, where the other sources hold single words;
- `festvox-ru` (BSD-like): the 620 sentences, 1.7 h, that a Russian man read for festival's `msu_ru_nsh` voice
  (`/usr/share/festival/voices/russian/msu_ru_nsh_clunits/{wav,lab}`): read connected speech, as users speak
  into a microphone, with the phone labels the voice was built from, so it needs no alignment;
- `flight-of-the-amazon-queen` (freeware, free to share and modify): the game's dialogue acted in English by
  its cast, Joe King and about thirty other characters (`amazon_queen`): 3,758 lines of conversational speech,
  spelled by pocketsphinx's own CMU dictionary as the dev set is;
- `beneath-a-steel-sky` (freeware, free to share and modify): the game's dialogue acted in English by its
  cast (`steel_sky`): its training lines, 2,782 of 3,431, 1.5 h of connected speech spelled the same way;
  every fifth line is kept out as a test of unheard English sentences, unless a training line of either game
  says the same words (`steel_sky.test_numbers`; the shipped models were trained on 2,744 lines, before that rule
  moved 38 repeated lines such as "What?" from the test side to training).

Every English recording of the dev set's packages (`en`, `en_GB`, `en_AU`, ...) is left out, so no dev-set
voice is trained on; the games' casts record for no package the dev set reads.

Phone timing (all but `festvox-ru`): espeak-ng gives each word's phonemes in its language (English words
come from the CMU dictionary instead); they are mapped to the nearest US English phone (keeping what the
lips do: /y/ and /ø/ stay rounded, Spanish and Catalan /β/, whose lips do not quite meet, drop the clip) and
pocketsphinx forces the alignment with its US-English acoustic model.
The alignment passes the same QC as the dev set's (`human_dev.align`), and the targets come from the
aligned phones the same way (`human_dev.to_examples`).
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

import numpy as np

from assets.model import amazon_queen, steel_sky
from assets.model.human_dev import KLETTRES, SAMPLE_RATE, TUXPAINT_STAMPS, DevClip, aligned_clip, decode, in_dictionary

FILLETS = Path("/usr/share/games/fillets-ng")
FESTVOX_RU = Path("/usr/share/festival/voices/russian/msu_ru_nsh_clunits")

TUXPAINT_LANGUAGES = {"fr": "fr", "ru": "ru", "ro": "ro", "ca": "ca", "bg": "bg", "es": "es", "be": "be",
                      "el": "el", "da": "da", "lt": "lt", "nl": "nl"}
"""Tux Paint's description languages → espeak-ng voice."""
KLETTRES_LANGUAGES = {"cs": "cs", "da": "da", "de": "de", "es": "es", "fr": "fr", "hu": "hu", "it": "it",
                      "lt": "lt", "nb": "nb", "nl": "nl", "pt_BR": "pt-br", "ru": "ru", "uk": "uk"}
"""KLettres' languages → espeak-ng voice (Arabic, Malayalam, Tswana and Low German left out: espeak-ng
reads their letters and syllables too poorly to align)."""
FILLETS_LANGUAGES = {"cs": "cs", "nl": "nl"}
"""Fish Fillets' spoken dialogue languages → espeak-ng voice (its English package holds effects, no lines)."""

# espeak-ng mnemonics (stress, stød "?", palatal ";", retroflex "." and length marks stripped) → CMU phones.
_ESPEAK_TO_CMU: dict[str, tuple[str, ...]] = {
    "p": ("P",), "b": ("B",), "m": ("M",), "f": ("F",), "v": ("V",), "w": ("W",), "w2": ("W",),
    "t": ("T",), "d": ("D",), "k": ("K",), "c": ("K",), "g": ("G",), "Q": ("G",), "x": ("HH",), "h": ("HH",),
    "C": ("HH",), "s": ("S",), "z": ("Z",), "S": ("SH",), "Z": ("ZH",), "tS": ("CH",), "dZ": ("JH",),
    "J^": ("JH",), "ts": ("T", "S"), "dz": ("D", "Z"), "T": ("TH",), "D": ("DH",),
    "n": ("N",), "n_": ("N",), "n^": ("N", "Y"), "N": ("NG",), "l": ("L",), "L": ("L",), "l^": ("L", "Y"),
    "r": ("R",), "R": ("R",), "R2": ("R",), "*": ("R",), "**": ("R",), "j": ("Y",), "I^": ("Y",),
    "a": ("AA",), "a#": ("AA",), "a-": ("AA",), "a:": ("AA",), "A": ("AA",), "A~": ("AA",), "0": ("AA",),
    "&": ("AE",), "V": ("AH",), "@": ("AH",), "@-": ("AH",), "@2": ("AH",), "3": ("ER",), "3-": ("ER",),
    "3:": ("ER",), "@L": ("AH", "L"), "e": ("EH",), "e-": ("EH",), "e:": ("EY",), "E": ("EH",), "E#": ("EH",),
    "E~": ("EH",), "i": ("IY",), "i:": ("IY",), "i\"": ("IH",), "I": ("IH",), "y-": ("UW",),
    "o": ("OW",), "o2": ("OW",), "o:": ("OW",), "O": ("AO",), "O2": ("AO",), "O:": ("AO",), "O~": ("AO",),
    "8": ("OW",), "W": ("OW",), "W#": ("OW",), "Y": ("AO",), "W~": ("AO",),
    "u": ("UW",), "u:": ("UW",), "u\"": ("UW",), "U": ("UH",),
    "aI": ("AY",), "aU": ("AW",), "oI": ("OY",), "OI": ("OY",), "oU": ("OW",), "eI": ("EY",),
    "eU": ("EH", "W"), "ea": ("EH", "AA"), "Oa": ("W", "AA"), "ja": ("Y", "AA"), "ju": ("Y", "UW"),
    "iI": ("IY",), "yI": ("IH", "Y"), "uI": ("UW", "Y"), "iU": ("IY", "W"), "Wy": ("OW", "Y"),
    "@U": ("AH", "W"), "yU": ("UW",), "E2": ("EH",), "u#": ("UW",), "ee": ("EY",), "&#": ("AE",),
    "i@": ("IY", "AH"), "i@3": ("IY", "ER"), "A@": ("AA", "R"), "e@": ("EH", "R"),
    "v#": ("V",), "EI": ("EY",), "VU": ("AW",), "Y:": ("OW",), "J": ("D", "Y"), "r-": ("ER",), "l-": ("AH", "L"),
}
ROUNDED_Y_LANGUAGES = frozenset({"fr", "da", "de", "nl", "hu", "nb"})
"""Languages whose espeak "y" is the rounded /y/ of "lune", "Tür"; elsewhere it is an unrounded /ɨ/ or /i/."""
_DROPS_CLIP = frozenset({"B"})
"""/β/ (Spanish and Catalan "pavo", "ovella"): the lips approach without meeting, neither a closure nor open."""
_MODIFIERS = ";.^"
_SKIPPED = re.compile(r"^(_.*|\(\w+\)|;|)$")  # pauses, language-switch markers, a lone palatal mark


def cmu_phones(symbols: list[str], language: str) -> list[str] | None:
    """CMU phones for espeak mnemonics of `language`, or None when a phone has no faithful counterpart."""
    phones: list[str] = []
    for symbol in symbols:
        base = symbol.lstrip("'\u02c8\u02cc,%=?")
        if _SKIPPED.match(base):
            continue
        if base in _DROPS_CLIP:
            return None
        if base == "y":
            phones.append("UW" if language.split("-")[0] in ROUNDED_Y_LANGUAGES else "IH")
            continue
        mapped = _ESPEAK_TO_CMU.get(base) or _ESPEAK_TO_CMU.get(base.rstrip(_MODIFIERS))
        if mapped is None:
            return None
        phones.extend(mapped)
    return phones


def _tuxpaint_recordings() -> list[tuple[str, Path, str]]:
    found = []
    for path in sorted(TUXPAINT_STAMPS.rglob("*_desc_*.ogg")):
        stem, _, language = path.stem.rpartition("_desc_")
        if language not in TUXPAINT_LANGUAGES:
            continue
        try:
            lines = path.with_name(stem + ".txt").read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        text = next((line.split("=", 1)[1] for line in lines if line.startswith(f"{language}.utf8=")), "")
        if text.strip():
            found.append((f"tuxpaint/{language}", path, text))
    return found


def _klettres_recordings() -> list[tuple[str, Path, str]]:
    found = []
    for language in KLETTRES_LANGUAGES:
        try:
            sounds = ElementTree.parse(KLETTRES / language / "sounds.xml").getroot().iter("sound")
        except (OSError, ElementTree.ParseError):
            continue
        for sound in sounds:
            path = KLETTRES / sound.get("file", "")
            if sound.get("name") and path.is_file():
                found.append((f"klettres/{language}", path, sound.get("name")))
    return found


_FILLETS_LINE = re.compile(r'dialogId\("([^"]+)",\s*"([^"]*)",[^\n]*\n\s*dialogStr\("((?:[^"\\]|\\.)*)"\)')
"""A line of a level's `dialogs_<language>.lua`: the sound's name, the speaker's font (one per character), the
English reference text, then, on the next line, the words spoken in that language."""


def _fillets_recordings(root: Path = FILLETS) -> list[tuple[str, Path, str]]:
    found = []
    for language in FILLETS_LANGUAGES:
        for dialogs in sorted((root / "script").glob(f"*/dialogs_{language}.lua")):
            try:
                lines = _FILLETS_LINE.findall(dialogs.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
            for name, font, text in lines:
                path = root / "sound" / dialogs.parent.name / language / f"{name}.ogg"
                if text.strip() and path.is_file():
                    found.append((f"fillets/{language}/{font.removeprefix('font_')}", path, text))
    return found


# festvox-ru's phones (doubled letters are the soft consonants, which keep their hard pair's lips; "a", "ae",
# "ay" are reduced vowels, "ur" a reduced /u/) → CMU phones.
_MSU_RU_TO_CMU: dict[str, tuple[str, ...]] = {
    "pau": ("SIL",), "ii": ("IY",), "i": ("IY",), "yy": ("IH",), "y": ("IH",), "uu": ("UW",), "u": ("UW",),
    "ur": ("UH",), "ee": ("EH",), "e": ("IH",), "oo": ("OW",), "aa": ("AA",), "a": ("AH",), "ae": ("AH",),
    "ay": ("AH",), "p": ("P",), "pp": ("P",), "b": ("B",), "bb": ("B",), "m": ("M",), "mm": ("M",),
    "f": ("F",), "ff": ("F",), "v": ("V",), "vv": ("V",), "t": ("T",), "tt": ("T",), "d": ("D",), "dd": ("D",),
    "k": ("K",), "kk": ("K",), "g": ("G",), "gg": ("G",), "c": ("T", "S"), "ch": ("CH",), "s": ("S",),
    "ss": ("S",), "z": ("Z",), "zz": ("Z",), "sh": ("SH",), "sch": ("SH",), "zh": ("ZH",), "h": ("HH",),
    "hh": ("HH",), "n": ("N",), "nn": ("N",), "l": ("L",), "ll": ("L",), "r": ("R",), "rr": ("R",), "j": ("Y",),
}
LABELLED_SPEAKER = "festvox/ru/nsh"


def labelled_clips(root: Path = FESTVOX_RU) -> tuple[list[DevClip], int]:
    """Clips of the festival voice's recordings in `root`, timed by the voice's own phone labels, and how
    many recordings were dropped: a label file that is missing, out of order, ends more than 50 ms away
    from its audio's end, or holds a phone with no mapping.

    A label file lists each phone's end time after a line "#"; a phone that maps to two CMU phones (the
    affricate "c", /ts/) is split in half."""
    from studio.engine.sources import AudioInputError

    ids = re.findall(r"^\( (\S+) \"(.*)\" \)$", _read(root / "etc" / "txt.done.data"), re.MULTILINE)
    clips, dropped = [], 0
    for name, text in ids:
        phones = _labelled_phones(_read(root / "lab" / f"{name}.lab"))
        try:
            audio = decode(root / "wav" / f"{name}.wav") if phones else None
        except AudioInputError:
            audio = None
        if audio is None or abs(phones[-1][2] - len(audio) / SAMPLE_RATE) > 0.05:
            dropped += 1
            continue
        clips.append(DevClip(root / "wav" / f"{name}.wav", LABELLED_SPEAKER, text, audio, phones))
    return clips, dropped


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _labelled_phones(label: str) -> tuple[tuple[str, float, float], ...] | None:
    lines = [line.strip() for line in label.splitlines()]
    if "#" not in lines:
        return None
    rows = [line.split() for line in lines[lines.index("#") + 1:] if line]
    phones, start = [], 0.0
    for row in rows:
        try:
            end = float(row[0])
        except (ValueError, IndexError):
            return None
        mapped = _MSU_RU_TO_CMU.get(row[-1])
        if mapped is None or end <= start:
            return None
        step = (end - start) / len(mapped)
        phones += [(phone, start + i * step, start + (i + 1) * step) for i, phone in enumerate(mapped)]
        start = end
    return tuple(phones) or None


def _game_recordings(folder: Path, log=print) -> list[tuple[str, Path, str]]:
    """The English games' dialogue lines (Flight of the Amazon Queen's, and Beneath a Steel Sky's training
    lines), their recordings written into subfolders of `folder`; a game that is not installed or cannot be
    read adds none."""
    items = []
    if amazon_queen.QUEEN_ARCHIVE.is_file():
        (folder / "amazon_queen").mkdir()
        try:
            items += amazon_queen.extract(folder / "amazon_queen")
        except (OSError, amazon_queen.ArchiveError) as error:
            log(f"human voices: {amazon_queen.QUEEN_ARCHIVE}: {error}; its dialogue is left out")
    if steel_sky.available():
        (folder / "steel_sky").mkdir()
        try:
            items += steel_sky.extract(folder / "steel_sky", part="train")
        except (OSError, steel_sky.DataError) as error:
            log(f"human voices: {steel_sky.SKY_DATA}: {error}; its dialogue is left out")
    return items


def recordings() -> list[tuple[str, Path, str]]:
    """(speaker, path, words) of every non-English recording the installed packages ship as a file."""
    return _tuxpaint_recordings() + _klettres_recordings() + _fillets_recordings()


_LANGUAGES = {"tuxpaint": TUXPAINT_LANGUAGES, "klettres": KLETTRES_LANGUAGES, "fillets": FILLETS_LANGUAGES}
"""Each source's languages → espeak-ng voice, by the first part of a speaker's name ("fillets/cs/small")."""


def _voice(speaker: str) -> str:
    source, language = speaker.split("/")[:2]
    return _LANGUAGES[source][language]


def _english(speaker: str) -> bool:
    """An English recording (the games' dialogue), spelled by pocketsphinx's own dictionary."""
    return speaker.startswith(("amazon_queen/", steel_sky.SPEAKER))


def align_all(items: list[tuple[str, Path, str]]) -> tuple[list[DevClip], int, int]:
    """Aligned clips of `items`, and how many could not be spelled or failed QC (one worker's share)."""
    from pocketsphinx import Decoder

    decoder = Decoder(samprate=SAMPLE_RATE, loglevel="FATAL")
    spell = _Speller(decoder)
    clips, unspelled, dropped = [], 0, 0
    for speaker, path, text in items:
        words = spell(speaker, text)
        if words is None:
            unspelled += 1
            continue
        clip = aligned_clip(decoder, speaker, path, text, words)
        if clip is None:
            dropped += 1
            continue
        clips.append(clip)
    return clips, unspelled, dropped


class _Speller:
    """The words of a recording as `decoder` can align them, or None when one cannot be spelled in US phones.

    English lines (the games' dialogue) use the decoder's own CMU dictionary, as the dev set does;
    other languages add each word to it once, spelled by espeak-ng in that language (`cmu_phones`)."""

    def __init__(self, decoder) -> None:
        self._decoder = decoder
        self._synths: dict = {}
        self._entries: dict[tuple[str, str], str | None] = {}

    def __call__(self, speaker: str, text: str) -> str | None:
        if _english(speaker):
            words = amazon_queen.dictionary_words(text)
            return " ".join(words) if in_dictionary(self._decoder, words) else None
        voice = _voice(speaker)
        names = [self._entry(voice, word) for word in re.sub(r"[^\w'-]+", " ", text).split() if word.strip("'-")]
        return " ".join(names) if names and None not in names else None

    def _entry(self, voice: str, word: str) -> str | None:
        from studio.speech.espeak import EspeakSynth, SpeechError

        key = (voice, word.lower())
        if key not in self._entries:
            try:
                synth = self._synths.setdefault(voice, EspeakSynth(voice))
                phones = cmu_phones([p.symbol for p in synth.synthesize(word).phonemes], voice)
            except SpeechError:
                phones = None
            self._entries[key] = f"w{len(self._entries)}" if phones else None
            if phones:
                self._decoder.add_word(self._entries[key], " ".join(phones), update=False)
        return self._entries[key]


def load_clips(items: list[tuple[str, Path, str]] | None = None, log=print,
               workers: int = 2) -> tuple[list[DevClip], dict]:
    """Every recording (of `items`, default all) whose words espeak-ng (or, in English, the CMU dictionary) can
    spell in CMU phones and whose alignment passes QC; with the default, also every recording of `festvox-ru`
    whose labels pass QC, and the games' dialogue, extracted into a folder removed afterwards.

    About 14,000 recordings: aligning them takes 13 minutes of one core, so `workers` processes share them."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with tempfile.TemporaryDirectory(prefix="game-dialogue-") as folder:
        everything = items if items is not None else recordings() + _game_recordings(Path(folder), log)
        shares = [everything[i::workers] for i in range(workers)]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            parts = list(pool.map(align_all, shares))
    clips = [clip for part, _, _ in parts for clip in part]
    labelled, unlabelled = labelled_clips() if items is None and FESTVOX_RU.is_dir() else ([], 0)
    clips += labelled
    summary = {"recordings": len(everything) + len(labelled) + unlabelled, "clips": len(clips),
               "qc_dropped": sum(p[2] for p in parts) + unlabelled, "not_spelled": sum(p[1] for p in parts),
               "audio_s": round(sum(len(c.audio) for c in clips) / SAMPLE_RATE, 1),
               "speakers": sorted({c.speaker for c in clips}),
               "clips_by_speaker": dict(sorted(Counter(c.speaker for c in clips).items())),
               "steel_sky_lines": sorted(int(path.stem) for speaker, path, _ in everything if speaker == steel_sky.SPEAKER),
               "steel_sky_split": "lines trained on, by their place in steel_sky.read_lines; the test lines are "
                                  "steel_sky.test_numbers (every fifth line, less those whose words a training line says)"}
    log(f"human voices: {len(clips)} clips ({summary['audio_s']:.0f} s) from {len(summary['speakers'])} speakers; "
        f"{summary['qc_dropped']} dropped by QC, {summary['not_spelled']} with a sound espeak-ng cannot spell in US phones")
    return clips, summary


def chained(clips: list[DevClip], seconds: float, rng: np.random.Generator) -> list[DevClip]:
    """Each speaker's clips joined back to back, in random order, into clips of at least `seconds`.

    A single word lasts about a second; training crops are 3 s, so unjoined words would fill most of
    each crop with padding."""
    by_speaker: dict[str, list[DevClip]] = {}
    for clip in clips:
        by_speaker.setdefault(clip.speaker, []).append(clip)
    joined = []
    for speaker in sorted(by_speaker):
        group: list[DevClip] = []
        for index in rng.permutation(len(by_speaker[speaker])):
            group.append(by_speaker[speaker][index])
            if sum(len(c.audio) for c in group) >= seconds * SAMPLE_RATE:
                joined.append(_join(group))
                group = []
        if group:
            joined.append(_join(group))
    return joined


def _join(group: list[DevClip]) -> DevClip:
    phones, offset = [], 0.0
    for clip in group:
        phones += [(name, start + offset, end + offset) for name, start, end in clip.phones]
        offset += len(clip.audio) / SAMPLE_RATE
    return DevClip(group[0].path, group[0].speaker, " | ".join(c.text for c in group),
                   np.concatenate([c.audio for c in group]), tuple(phones))


CHAIN_S = 4.0
"""Length of the joined clips the model trains on (crops are 3 s)."""


def available() -> bool:
    return (TUXPAINT_STAMPS.is_dir() or any((KLETTRES / language).is_dir() for language in KLETTRES_LANGUAGES)
            or (FILLETS / "script").is_dir() or FESTVOX_RU.is_dir() or amazon_queen.QUEEN_ARCHIVE.is_file()
            or steel_sky.available())


def training_examples(augmented_copies: int, seed: int, log=print,
                      items: list[tuple[str, Path, str]] | None = None, record: dict | None = None) -> list:
    """train.Example for every aligned recording (of `items`, default all), joined per speaker, and
    `augmented_copies` degraded copies of each (`corpus.augment`, as the synthetic corpus gets); [] when no
    package is installed. `record`, when given, receives `load_clips`' summary (for the corpus cache)."""
    from assets.model.corpus import augment
    from assets.model.human_dev import to_examples
    from studio.engine.features import LogMelExtractor

    if not available():
        log("human voices: klettres-data, tuxpaint-stamps-default, fillets-ng-data, festvox-ru, "
            "flight-of-the-amazon-queen and beneath-a-steel-sky are not installed; training on synthetic speech only "
            "(scripts/setup.sh system dev installs them)")
        return []
    clips, summary = load_clips(items, log)
    if record is not None:
        record.update(summary)
    rng = np.random.default_rng(seed)
    joined = chained(clips, CHAIN_S, rng)
    del clips  # the joined clips hold the audio now; one copy of 5.5 h is enough while training
    extractor = LogMelExtractor()
    examples = []
    joined.reverse()
    while joined:  # one joined clip at a time, in order, its audio dropped once its examples exist
        clip = joined.pop()
        clean = to_examples([clip])[0]
        examples.append(dataclasses.replace(clean, audio=None))
        for _ in range(augmented_copies):
            noisy = augment(clip.audio, rng)
            examples.append(dataclasses.replace(clean, features=extractor.compute(noisy)[: len(clean.features)],
                                                audio=None))
    return examples
