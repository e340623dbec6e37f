"""English sentences for the face-model corpus: hand-written phonetically rich lines plus a seeded
template generator, together covering every English phoneme (incl. rare ones: /ʒ/ measure,
/ɔɪ/ boy, /ʊ/ book, /ʊə/ tour, /θ/ /ð/, /ŋ/) and plenty of p/b/m closures.

Held-out split: a sentence is held out when the MD5 of its text falls in one tenth of the hash
space (`is_held_out`); training never sees those lines, evaluation sees only them, whatever seed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np

FIXED_SENTENCES: tuple[str, ...] = (
    "Bob met Pam at the pub by the maple tree.",
    "The measure of pleasure is leisure, not treasure.",
    "A boy with a noisy toy annoyed the royal employee.",
    "Thirty thousand feathers fell on the thick path.",
    "Their mother and father gathered there together.",
    "She should share the shiny shells she found by the shore.",
    "Judge George jogged over the bridge in June.",
    "Which witch watched the cheap cheese chart?",
    "The young king was singing a long song about spring.",
    "Look, a good book about wool and wood!",
    "Sure, the poor tourist took a tour of the moor.",
    "The early bird heard a word about the third curb.",
    "How now, brown cow, around the loud town?",
    "Five wide pies lie by the bright light.",
    "Paint the plain gate grey on a rainy day.",
    "Go slowly over the old stone road, Joe.",
    "Pat's black cat sat flat on a fat mat.",
    "The bumblebee buzzed above the purple plum blossoms.",
    "Maybe baby Emma may mumble my name.",
    "Put the pepper and the paprika in the metal pot.",
    "A big blue balloon bobbed above the beach.",
    "Vivian values vivid violet velvet.",
    "Yellow yoyos, unusual usual yes.",
    "Hugo hurried home to have his hot tea.",
    "Zoe's zebra zigzagged past the lazy zoo.",
    "The vision of the beige garage was a casual illusion.",
    "Ruth threw three things through the window.",
    "We were wondering whether the weather would warm up.",
    "Quick, hand me the quilt and the queen's question.",
    "Lily lulled the little lamb to sleep.",
    "Is it an hour or an hour and a half?",
    "The cup of coffee cooled before the couple could come.",
    "Nothing is better than a bottle of water after a mountain hike.",
    "Could you pass the butter, please?",
    "Oh no, the oboe is out of tune again!",
    "An apple a day keeps the doctor away.",
    "My phone number is five five five, one two three four.",
    "It cost three dollars and forty-nine cents in nineteen ninety-nine.",
    "Please remember to buy bread, milk, and bananas.",
    "Why would anyone bottle up emotions like that?",
    "Moving a mountain might be impossible, but we can move a pebble.",
    "The map shows a path from the pond to the palm grove.",
    "Mom bought a mop, a broom, and a bumpy rubber mat.",
    "Were you aware of the rare bear near the pier?",
    "They usually choose orange juice in the morning.",
    "Jeff's fifth sixth-grade class was thrilled.",
    "Aw, the autumn dawn is awfully calm.",
    "Hear, here, the sheer beer is near.",
    "Yes, the new student knew the music by heart.",
    "Bubbles popped on the top of the bubbling pot.",
    "Sam's mom thumbed the album of family photos.",
    "I appreciate your patience, but please be prompt.",
    "Emily, bring the umbrella, it might rain tomorrow.",
    "Absolutely, the problem is simple to solve.",
    "The ship's captain shouted, abandon ship!",
    "Would you like some warm soup or a sandwich?",
    "The thermometer measured ninety-eight point six.",
    "A cheerful choir sang at the charity lunch.",
    "Plump peaches and plums fill the pale basket.",
    "Every evening, Ivy reads a mystery novel by the fire.",
)

_NAMES = ("Bob", "Pam", "Maggie", "Paul", "Beth", "Thomas", "Judy", "George", "Zoe", "Yusuf", "Ruth", "Vivian",
          "Hugo", "Chloe", "Shawn", "Joy", "Noah", "Ivy", "Oscar", "Wendy", "Xavier", "Quentin", "Lily", "Martha",
          "Benjamin", "Penelope", "Amir", "Ursula", "Theo", "Imogen", "Douglas", "Fatima", "Kevin", "Nora")
_ADJECTIVES = ("purple", "beige", "tiny", "enormous", "shiny", "rough", "smooth", "thick", "thin", "joyful",
               "gloomy", "bumpy", "pale", "bright", "noisy", "quiet", "yellow", "warm", "cool", "ancient",
               "modern", "fuzzy", "heavy", "usual", "lovely", "awkward", "cheap", "brave", "curious", "zesty",
               "wooden", "broken", "pleasant", "humble", "mighty", "soft", "sharp", "poor", "rare", "loud")
_NOUNS = ("measure", "treasure", "garage", "boy", "coin", "voice", "thumb", "bath", "feather", "mother",
          "cheese", "church", "judge", "bridge", "ship", "shoe", "thing", "song", "ring", "book", "foot",
          "tour", "bird", "word", "map", "bubble", "pebble", "apple", "maple", "puppet", "mop", "drum",
          "lamp", "umbrella", "window", "kitchen", "garden", "mountain", "bottle", "butter", "yacht",
          "zebra", "violin", "oyster", "cushion", "jacket", "engine", "puzzle", "mirror", "pillow", "basket")
_PLURALS = ("apples", "pebbles", "bubbles", "thumbs", "feathers", "coins", "books", "bridges", "songs", "maps",
            "boys", "birds", "shoes", "bottles", "lamps", "drums", "puppets", "cushions", "mirrors", "pillows")
_VERBS_PAST = ("bought", "mopped", "measured", "pushed", "pulled", "painted", "grabbed", "thumped", "shared",
               "judged", "sang about", "hugged", "watched", "bumped", "moved", "wrapped", "played with",
               "threw", "found", "dropped", "brought", "polished", "enjoyed", "stopped", "admired", "borrowed")
_VERBS_BASE = ("buy", "mop", "measure", "push", "pull", "paint", "grab", "share", "judge", "hug", "watch",
               "move", "wrap", "throw", "find", "drop", "bring", "polish", "enjoy", "stop", "admire", "borrow")
_PREPOSITIONS = ("by", "beneath", "above", "beside", "behind", "through", "past", "among", "under", "near")
_TIMES = ("this morning", "yesterday", "at the weekend", "every Thursday", "in the evening", "just now",
          "before lunch", "after the storm", "on the ninth of June", "at half past two")
_ADVERBS = ("quickly", "happily", "bravely", "usually", "smoothly", "awkwardly", "thoughtfully", "boldly",
            "very", "rather", "absolutely", "probably")
_EXCLAMATIONS = ("Wow", "Oh boy", "Hmm", "Yes", "No way", "Ah", "Oops", "Well", "Okay", "Bravo")
_NUMBERS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "thirty",
            "a hundred", "fifty-five", "a thousand")

_TEMPLATES = (
    "{Name} {verb_past} the {adj} {noun} {prep} the {noun2}.",
    "{Name} {verb_past} {number} {plural} {time}.",
    "Did {name} {verb} the {adj} {noun} {time}?",
    "Please {verb} the {adj} {noun} {prep} the {noun2}.",
    "{Exclaim}! {Name} {verb_past} a {adj} {noun}.",
    "I think {name}'s {noun} is {adverb} {adj}.",
    "Why did {name} {verb} {number} {adj} {plural}?",
    "The {adj} {noun} and the {adj2} {noun2} were {prep} the {noun3}.",
    "{Name} and {name2} {adverb} {verb_past} the {noun} {time}.",
    "{Exclaim}, the {noun} is {adj}, but the {noun2} is {adj2}.",
    "Maybe {name} will {verb} the {noun}, maybe not.",
    "{Time}, {name} {verb_past} my {adj} {noun}.",
)


def is_held_out(text: str) -> bool:
    """True for the tenth of all sentences reserved for evaluation (stable across runs and seeds)."""
    digest = hashlib.md5(text.strip().encode("utf-8")).digest()
    return digest[0] % 10 == 0


def _fill(template: str, rng: np.random.Generator) -> str:
    def pick(options: tuple[str, ...]) -> str:
        return options[int(rng.integers(len(options)))]

    names = rng.choice(len(_NAMES), 2, replace=False)
    nouns = rng.choice(len(_NOUNS), 3, replace=False)
    adjectives = rng.choice(len(_ADJECTIVES), 2, replace=False)
    time = pick(_TIMES)
    values = {
        "name": _NAMES[names[0]], "name2": _NAMES[names[1]], "Name": _NAMES[names[0]],
        "noun": _NOUNS[nouns[0]], "noun2": _NOUNS[nouns[1]], "noun3": _NOUNS[nouns[2]],
        "adj": _ADJECTIVES[adjectives[0]], "adj2": _ADJECTIVES[adjectives[1]],
        "plural": pick(_PLURALS), "verb_past": pick(_VERBS_PAST), "verb": pick(_VERBS_BASE),
        "prep": pick(_PREPOSITIONS), "time": time, "Time": time[0].upper() + time[1:], "adverb": pick(_ADVERBS),
        "Exclaim": pick(_EXCLAMATIONS), "number": pick(_NUMBERS),
    }
    return template.format(**values)


def generate_sentences(seed: int, held_out: bool = False) -> Iterator[str]:
    """Endless, seeded stream of distinct sentences from one side of the held-out split.

    The fixed phonetically rich lines (those on the requested side, shuffled by the seed) are mixed
    in among template sentences; two templates are sometimes joined so utterances carry sentence pauses.
    """
    rng = np.random.default_rng(seed)
    fixed = [text for text in FIXED_SENTENCES if is_held_out(text) == held_out]
    fixed = [fixed[i] for i in rng.permutation(len(fixed))]
    seen: set[str] = set(fixed)
    while True:
        if fixed and rng.random() < 0.3:
            yield fixed.pop()
            continue
        parts = [_fill(_TEMPLATES[int(rng.integers(len(_TEMPLATES)))], rng)
                 for _ in range(1 + int(rng.random() < 0.25))]
        text = " ".join(parts)
        if text in seen or is_held_out(text) != held_out:
            continue
        seen.add(text)
        yield text
