"""Human-speech dev set: real people's recordings, aligned by pocketsphinx, never trained on.

Sources (Debian packages; none of these speakers is behind any training voice):
- `klettres-data` (KLettres, GPL-2+): one US and one British English speaker reading the alphabet and
  short words (`/usr/share/klettres/{en,en_GB}/{alpha,syllab}/*.ogg`). Letters such as B, M, P, W, O,
  Q, U and words such as "ball", "me", "my", "pet", "no", "saw", "well" carry the closures and
  rounded sounds this set exists to check;
- `ktuberling-data` (KTuberling, GPL-2+): the English speaker naming the game's objects
  (`/usr/share/ktuberling/sounds/en/*.ogg`): "umbrella", "pepperoni", "pineapple", "mushroom",
  "woman", "moon walker", "tomato": closures inside words, between vowels, and more rounded vowels;
- `tuxpaint-stamps-default` (Tux Paint stamps, GPL-2): the English spoken descriptions of the animal
  stamps (`/usr/share/tuxpaint/stamps/**/*_desc.ogg`, the words in the stamp's `.txt`): "a penguin",
  "a pigeon", "an hippopotamus", "a wombat", "a toucan": an article run into a noun, as in connected
  speech. Counted as one speaker, `tuxpaint/en` (the package does not say who recorded them).

Phone timing comes from pocketsphinx (PyPI, its bundled US-English acoustic model and CMU dictionary)
forcing an alignment of the known word, with a QC step: an alignment is dropped when its speech
(everything not SIL) does not cover the clip's audible region well (intersection over union < 0.4;
breaths and prevoicing around an isolated word count as audible), when any phone is shorter than
the recognizer's 3-frame minimum, or when the search stopped before the text's last word (pocketsphinx
then labels the words it never reached as silence). A stamp's description starts with an article ("a pig"),
which its recording often leaves out; the recognizer first decides whether the article is spoken
(`heard_words`), and the alignment uses the words it heard.

Used only to select models and report on them (`evaluate.human_dev_report`); the Debian telephony
prompt recordings are not used here or anywhere in training. The same packages' recordings in other
languages, by other speakers, are training data (`human_voices`); no English one is.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

KLETTRES = Path("/usr/share/klettres")
KTUBERLING = Path("/usr/share/ktuberling/sounds/en")
TUXPAINT_STAMPS = Path("/usr/share/tuxpaint/stamps")
SPEAKERS = ("en", "en_GB")
_KTUBERLING_PREFIXES = ("egypt_", "moon_", "pizzeria_", "tv_")
_KTUBERLING_WORDS = {"palmtree": "palm tree", "fallingstar": "falling star", "moonwalker": "moon walker",
                     "broccolli": "broccoli", "sphynx": "sphinx", "ufo": "u f o"}
QC_MIN_IOU = 0.4
_SILENCES = ("<s>", "</s>", "<sil>")
_ARTICLES = ("a", "an", "the")
SAMPLE_RATE = 16000


@dataclass(frozen=True)
class DevClip:
    path: Path
    speaker: str
    text: str
    audio: np.ndarray  # float32 mono 16 kHz
    phones: tuple[tuple[str, float, float], ...]  # (CMU phone, start s, end s), SIL included


def available() -> bool:
    return any((KLETTRES / speaker).is_dir() for speaker in SPEAKERS) or KTUBERLING.is_dir() or TUXPAINT_STAMPS.is_dir()


def _recordings() -> list[tuple[str, Path, str, str]]:
    """(speaker, path, text, name in reports) of every recording the installed packages ship."""
    found = [(f"klettres/{speaker}", path, path.stem.lower(), f"klettres/{speaker}/{path.parent.name}/{path.name}")
             for speaker in SPEAKERS for path in sorted((KLETTRES / speaker).glob("*/*.ogg"))]
    for path in sorted(KTUBERLING.glob("*.ogg")):
        word = path.stem.lower()
        word = next((word[len(p):] for p in _KTUBERLING_PREFIXES if word.startswith(p)), word)
        found.append(("ktuberling/en", path, _KTUBERLING_WORDS.get(word, word), f"ktuberling/en/{path.name}"))
    for path in sorted(TUXPAINT_STAMPS.rglob("*_desc.ogg")):
        text = _stamp_words(path.with_name(path.name.removesuffix("_desc.ogg") + ".txt"))
        if text:
            found.append(("tuxpaint/en", path, text, f"tuxpaint/en/{path.relative_to(TUXPAINT_STAMPS)}"))
    return found


def _stamp_words(description: Path) -> str | None:
    """The spoken words of a Tux Paint stamp: the first line of its description, lower case, letters only
    (the other lines are translations); None when the stamp has no description."""
    try:
        first = description.read_text(encoding="utf-8").splitlines()[0]
    except (OSError, UnicodeDecodeError, IndexError):
        return None
    return " ".join(re.sub(r"[^a-z']+", " ", first.lower()).split()) or None


def decode(path: Path) -> np.ndarray:
    """A recording as float32 mono at SAMPLE_RATE."""
    from studio.engine.audio_file import AudioFileStream

    return np.concatenate([chunk[:, 0] for chunk in AudioFileStream(path).chunks(rate=SAMPLE_RATE)])


def _audible(audio: np.ndarray) -> tuple[float, float] | None:
    """Start and end (s) of the region within 30 dB of the clip's loudest 10 ms."""
    hop = SAMPLE_RATE // 100
    frames = audio[: len(audio) // hop * hop].reshape(-1, hop)
    level = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    loud = np.flatnonzero(level > level.max() - 30)
    return (loud[0] / 100, (loud[-1] + 1) / 100) if loud.size else None


def _pcm(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes()


def heard_words(decoder, audio: np.ndarray, text: str) -> str:
    """`text` as the recording says it: without its leading article when the recognizer, free to skip it,
    does not hear one.

    Tux Paint's speaker reads many descriptions without their article ("a pig" as "pig"). Forced onto
    such a recording, the article takes the first consonant's release: the aligner gives it the 3-frame
    minimum, and the consonant after it starts 35-75 ms after the burst that ended it (for a /p/, after
    the lips have parted). Any other text is returned as it is."""
    words = text.split()
    if len(words) < 2 or words[0] not in _ARTICLES:
        return text
    rest = " ".join(words[1:])
    try:
        decoder.add_jsgf_string("description", f"#JSGF V1.0;\ngrammar description;\npublic <words> = [ {words[0]} ] {rest} ;\n")
        decoder.activate_search("description")
        decoder.start_utt()
        decoder.process_raw(_pcm(audio), full_utt=True)
        decoder.end_utt()
    except RuntimeError:
        return text
    heard = decoder.hyp()
    return rest if heard is not None and heard.hypstr == rest else text


def align(decoder, audio: np.ndarray, text: str) -> tuple[tuple[str, float, float], ...] | None:
    """Phones of `text` in `audio` by forced alignment, or None when QC rejects the alignment."""
    pcm = _pcm(audio)
    try:
        decoder.set_align_text(text)
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        decoder.set_alignment()
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        alignment = decoder.get_alignment()
    except (RuntimeError, ValueError):
        return None
    if alignment is None:
        return None
    spoken = [word.name.split("(")[0] for word in alignment if word.name not in _SILENCES]
    if spoken != text.split():  # the search gave up part way: the words it never reached are labelled silence
        return None
    phones = tuple((phone.name, phone.start / 100, (phone.start + phone.duration) / 100)
                   for word in alignment for phone in word)
    speech = [(start, end) for name, start, end in phones if name != "SIL"]
    audible = _audible(audio)
    if not speech or audible is None or any(end - start < 0.029 for start, end in speech):  # 3 frames minimum
        return None
    first, last = speech[0][0], speech[-1][1]
    overlap = max(0.0, min(last, audible[1]) - max(first, audible[0]))
    union = max(last, audible[1]) - min(first, audible[0])
    return phones if overlap / union >= QC_MIN_IOU else None


def in_dictionary(decoder, words: list[str]) -> bool:
    """True when the decoder's dictionary spells every word: it can align only the words it can spell."""
    return bool(words) and all(decoder.lookup_word(word) is not None for word in words)


def aligned_clip(decoder, speaker: str, path: Path, text: str, words: str, listener=None) -> DevClip | None:
    """The recording at `path` with its phones aligned to `words` (the decoder's spelling of `text`), or
    None when it cannot be decoded or its alignment fails QC. Given a `listener` (`text` is then `words`), a
    leading article it does not hear is left out of both. The listener is a decoder of its own: a decoder's
    noise estimate carries over from clip to clip, so the aligner's stays what it would be without it."""
    from studio.engine.sources import AudioInputError

    try:
        audio = decode(path)
    except AudioInputError:
        return None
    if listener is not None:
        text = words = heard_words(listener, audio, words)
    phones = align(decoder, audio, words)
    return None if phones is None else DevClip(path, speaker, text, audio, phones)


def align_recordings(recordings: list[tuple[str, Path, str, str]]) -> tuple[list[DevClip], list[str], list[str]]:
    """(speaker, path, words, name) of each recording → the clips that align and pass QC, the names QC dropped,
    and the names with a word the dictionary lacks: the dev set's alignment, for any set scored as it is."""
    from pocketsphinx import Decoder

    decoder = Decoder(samprate=SAMPLE_RATE, loglevel="FATAL")
    listener = Decoder(samprate=SAMPLE_RATE, loglevel="FATAL")
    clips, dropped, unknown = [], [], []
    for speaker, path, text, name in recordings:
        if not in_dictionary(decoder, text.split()):
            unknown.append(name)
            continue
        clip = aligned_clip(decoder, speaker, path, text, text, listener=listener)
        if clip is None:
            dropped.append(name)
            continue
        clips.append(clip)
    return clips, dropped, unknown


def load_dev_set(log=print) -> tuple[list[DevClip], dict]:
    """Every clip that aligns and passes QC, and a summary (clips seen, dropped and why)."""
    recordings = _recordings()
    clips, dropped, unknown = align_recordings(recordings)
    said = {path: (text, name) for _, path, text, name in recordings}
    article_not_heard = [said[clip.path][1] for clip in clips if clip.text != said[clip.path][0]]
    summary = {"source": "Debian klettres-data, ktuberling-data (GPL-2+) and tuxpaint-stamps-default (GPL-2): "
                         "4 human speakers, letters, words, short names and an article with a noun",
               "clips": len(clips), "qc_dropped": dropped, "not_in_dictionary": unknown,
               "article_not_heard": article_not_heard,
               "audio_s": round(sum(len(c.audio) for c in clips) / SAMPLE_RATE, 1)}
    log(f"human dev set: {len(clips)} clips, {len(dropped)} dropped by QC, {len(unknown)} not in the dictionary")
    return clips, summary


def freeze(clips: list[DevClip], path: Path) -> None:
    """Write the clips' labels as JSON (recording, speaker, words, aligned phones, the file's sha256): a frozen set
    that `thaw` scores without running the aligner, and that refuses a recording a package update changed."""
    entries = [{"path": str(clip.path), "sha256": hashlib.sha256(clip.path.read_bytes()).hexdigest(),
                "speaker": clip.speaker, "text": clip.text, "phones": [list(phone) for phone in clip.phones]}
               for clip in clips]
    path.write_text("[\n" + ",\n".join(json.dumps(entry) for entry in entries) + "\n]\n", encoding="utf-8")  # a clip a line


def thaw(path: Path) -> list[DevClip]:
    """The clips a `freeze` file lists, their audio decoded from the installed packages."""
    clips = []
    for entry in json.loads(path.read_text(encoding="utf-8")):
        recording = Path(entry["path"])
        if not recording.is_file():
            raise FileNotFoundError(f"{path}: recording {recording} is not installed (apt-get install klettres-data "
                                    "ktuberling-data tuxpaint-stamps-default)")
        if hashlib.sha256(recording.read_bytes()).hexdigest() != entry["sha256"]:
            raise ValueError(f"{path}: recording {recording} differs from the one frozen (its sha256 changed)")
        phones = tuple((name, float(start), float(end)) for name, start, end in entry["phones"])
        clips.append(DevClip(recording, entry["speaker"], entry["text"], decode(recording), phones))
    return clips


def to_examples(clips: list[DevClip], telephone: bool = False, gain_db: float = 0.0, snr_db: float | None = None):
    """train.Example per clip: features, and targets from the aligned phones (festival-style segments).

    The same clips as users' setups give them, so the report shows how the model holds up there:
    `telephone`: as a phone line carries them (band-limited via 8 kHz, μ-law coded: calls, voicemail, cheap
    headsets); `gain_db`: through a hotter microphone gain (clipped at full scale); `snr_db`: in a room whose
    pink noise sits that far below the speech (the same noise for a clip on every run)."""
    from assets.model.corpus import festival_phonemes, mix_noise, pink_noise, telephone_band
    from assets.model.train import utterance_to_example
    from studio.engine.features import LogMelExtractor
    from studio.speech.visemes import phoneme_track

    extractor = LogMelExtractor()
    examples = []
    for index, clip in enumerate(clips):
        segments = [(name.lower() if name != "SIL" else "pau", end) for name, _, end in clip.phones]
        phonemes = festival_phonemes(segments)
        targets = phoneme_track(phonemes, len(clip.audio) / SAMPLE_RATE, 100.0, timing="segment")
        audio = telephone_band(clip.audio, SAMPLE_RATE, mu_law=True) if telephone else clip.audio
        if snr_db is not None:
            audio = mix_noise(audio, pink_noise(len(audio), np.random.default_rng(index)), snr_db)
        if gain_db:
            audio = np.clip(audio * 10 ** (gain_db / 20.0), -1.0, 1.0)
        audio = np.asarray(audio, np.float32)
        examples.append(utterance_to_example(audio, targets, extractor, keep_audio=True))
    return examples
