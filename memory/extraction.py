"""What the memory hierarchy derives from messages: summaries, facts, preferences, entity mentions.

With an LLM configured these come from pydantic-validated structured output; without one from
deterministic extractive rules (`mode: "extractive"`):
- summary: the most central sentences (content-word frequency), in conversation order;
- facts: first-person statements about the user ("my name is …", "I live in …", "I work at …",
  "I am 34 years old", "my <thing> is …");
- preferences: "I like / love / enjoy / prefer …", "I don't like / hate / dislike …",
  "my favourite <category> is …".
Only user messages yield facts and preferences extractively: an assistant's sentences are not
statements about the user.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from core.llm.client import chat, chat_json, llm_configured
from knowledge.pipeline.extraction import normalise_name
from retrieval.lucene import STOP_WORDS


@dataclass
class Message:
    id: str
    role: str
    text: str
    timestamp: str
    author_name: str | None = None

    def speaker(self) -> str | None:
        """Whom a first-person statement of this message is about: "user" for the user's messages,
        the author's name for another role's named speaker (a second person in the conversation),
        None for an unnamed assistant, system or tool (the agent speaking of itself)."""
        if self.role == "user":
            return "user"
        return (self.author_name or "").strip() or None


@dataclass
class FactCandidate:
    subject: str
    predicate: str
    object: str
    text: str
    source_ids: list[str]
    confidence: float = 0.6


@dataclass
class PreferenceCandidate:
    category: str
    value: str
    sentiment: str  # "like" | "dislike"
    text: str
    source_ids: list[str]


@dataclass
class Derived:
    facts: list[FactCandidate] = field(default_factory=list)
    preferences: list[PreferenceCandidate] = field(default_factory=list)
    mode: str = "extractive"


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s'-]", " ", text.casefold())).strip(" '-")


# --- summaries ---------------------------------------------------------------------------------------

_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)
SUMMARY_MAX_CHARS = 800


def summarize_extractive(messages: list[Message], *, max_sentences: int = 3) -> str:
    sentences: list[tuple[int, str, str]] = []
    for message in messages:
        for part in _SENTENCES.split(message.text):
            part = part.strip()
            if len(part) >= 12:
                sentences.append((len(sentences), message.role, part))
    if not sentences:
        return " ".join(f"{m.role}: {m.text.strip()}" for m in messages)[:SUMMARY_MAX_CHARS]
    freq = Counter(
        w for _i, _r, s in sentences for w in (x.casefold() for x in _WORD.findall(s)) if w not in STOP_WORDS
    )

    def weight(sentence: str) -> float:
        words = [w.casefold() for w in _WORD.findall(sentence)]
        content = [w for w in words if w not in STOP_WORDS]
        return sum(freq[w] for w in set(content)) / (1 + len(words)) ** 0.5

    best = sorted(sentences, key=lambda s: (-weight(s[2]), s[0]))[:max_sentences]
    text = " ".join(f"{role}: {s}" for _i, role, s in sorted(best))
    return text[:SUMMARY_MAX_CHARS]


SUMMARY_PROMPT = (
    "Summarize this conversation in 2-3 sentences. Keep names, decisions, facts about the user and "
    "open questions; do not add anything that is not in the conversation."
)


def summarize(messages: list[Message]) -> tuple[str, str]:
    """(summary text, mode)."""
    if not llm_configured():
        return summarize_extractive(messages), "extractive"
    transcript = "\n".join(f"{m.role}: {m.text}" for m in messages)
    text = chat(
        [{"role": "system", "content": SUMMARY_PROMPT}, {"role": "user", "content": transcript}]
    ).strip()
    if not text:
        return summarize_extractive(messages), "extractive"
    return text[:4000], "llm"


# --- facts and preferences: extractive -------------------------------------------------------------

_END = r"(?=[.!?,;:]|\s+(?:but|because|and|although|though|since|so|which|who)\b|$)"
_VALUE = r"([^.!?,;:\n]{1,80}?)"
_LIKE = re.compile(
    r"\bI\s+(?:really\s+|absolutely\s+|just\s+|also\s+|do\s+)?(love|like|enjoy|prefer|adore)\s+"
    + _VALUE
    + _END,
    re.IGNORECASE,
)
_DISLIKE = re.compile(
    r"\bI\s+(?:really\s+|absolutely\s+|just\s+|also\s+)?"
    r"(?:(?:don't|do not|dont|never|no longer|can't|cannot)\s+(?:like|enjoy|stand|want|eat|drink)"
    r"|hate|dislike|detest)\s+" + _VALUE + _END,
    re.IGNORECASE,
)
_FAVOURITE = re.compile(r"\bmy\s+favou?rite\s+([\w -]{2,30}?)\s+is\s+" + _VALUE + _END, re.IGNORECASE)
_FACTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bmy\s+name\s+is\s+" + _VALUE + _END, re.IGNORECASE), "name"),
    (re.compile(r"\b(?:call me)\s+" + _VALUE + _END, re.IGNORECASE), "name"),
    (
        re.compile(
            r"\bI\s+(?:now\s+|currently\s+)?(?:live|am living|'m living|reside)\s+in\s+" + _VALUE + _END,
            re.IGNORECASE,
        ),
        "lives_in",
    ),
    (
        re.compile(r"\bI\s+(?:have\s+|just\s+)?(?:moved|relocated)\s+to\s+" + _VALUE + _END, re.IGNORECASE),
        "lives_in",
    ),
    (re.compile(r"\bI\s+(?:now\s+)?work\s+(?:at|for)\s+" + _VALUE + _END, re.IGNORECASE), "works_at"),
    (re.compile(r"\bI\s+work\s+as\s+(?:an?\s+)?" + _VALUE + _END, re.IGNORECASE), "occupation"),
    (re.compile(r"\bI(?:'m|\s+am)\s+(\d{1,3})\s+years?\s+old\b", re.IGNORECASE), "age"),
    (re.compile(r"\bmy\s+([a-z][a-z -]{1,30}?)\s+is\s+" + _VALUE + _END, re.IGNORECASE), "*"),
]
_MAX_VALUE_WORDS = 6


_TRAILING = re.compile(
    r"\s+(?:now|anymore|any more|currently|these days|too|as well|nowadays)$", re.IGNORECASE
)
_LEADING = re.compile(r"^(?:called|named)\s+", re.IGNORECASE)


def _clean_value(value: str) -> str | None:
    value = value.strip(" \"'()[]")
    value = _LEADING.sub("", _TRAILING.sub("", value)).strip()
    value = (
        re.sub(r"^(?:the|a|an|to)\s+", "", value, flags=re.IGNORECASE) if len(value.split()) > 1 else value
    )
    if not value or len(value.split()) > _MAX_VALUE_WORDS:
        return None
    return value


def derive_extractive(messages: list[Message]) -> Derived:
    derived = Derived(mode="extractive")
    for message in messages:
        subject = message.speaker()
        if subject is None:
            continue
        for sentence in _SENTENCES.split(message.text):
            sentence = sentence.strip()
            if not sentence:
                continue
            if subject == "user":  # preferences are the user's (the profile holds them)
                _preferences(sentence, message.id, derived)
            _facts(sentence, message.id, subject, derived)
    return derived


def _preferences(sentence: str, message_id: str, derived: Derived) -> None:
    for match in _FAVOURITE.finditer(sentence):
        value = _clean_value(match.group(2))
        if value:
            derived.preferences.append(
                PreferenceCandidate(norm(match.group(1)), value, "like", sentence, [message_id])
            )
    # "I don't like X" also reads as "like X": a like inside a dislike is not one
    negated = [m.span() for m in _DISLIKE.finditer(sentence)]
    for pattern, sentiment in ((_DISLIKE, "dislike"), (_LIKE, "like")):
        for match in pattern.finditer(sentence):
            value = _clean_value(match.groups()[-1])
            inside = any(a <= match.start() < b for a, b in negated)
            if value and not (sentiment == "like" and inside):
                derived.preferences.append(
                    PreferenceCandidate("general", value, sentiment, sentence, [message_id])
                )


def _facts(sentence: str, message_id: str, subject: str, derived: Derived) -> None:
    taken: set[str] = set()
    for pattern, predicate in _FACTS:
        for match in pattern.finditer(sentence):
            if predicate == "*":
                attribute = norm(match.group(1))
                if attribute.startswith(("favourite", "favorite", "name")) or attribute in taken:
                    continue
                value, pred = _clean_value(match.group(2)), attribute.replace(" ", "_")
            else:
                value, pred = _clean_value(match.group(1)), predicate
            if value and pred not in taken:
                taken.add(pred)
                derived.facts.append(FactCandidate(subject, pred, value, sentence, [message_id]))


# --- facts and preferences: LLM --------------------------------------------------------------------


class _LLMFact(BaseModel):
    subject: str = Field(min_length=1, max_length=200)
    predicate: str = Field(min_length=1, max_length=100)
    object: str = Field(min_length=1, max_length=300)
    statement: str = Field(min_length=1, max_length=1000)
    message_ids: list[str] = Field(default_factory=list, max_length=50)
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)


class _LLMPreference(BaseModel):
    category: str = Field(default="general", min_length=1, max_length=100)
    value: str = Field(min_length=1, max_length=300)
    sentiment: str = Field(pattern=r"^(like|dislike)$")
    statement: str = Field(min_length=1, max_length=1000)
    message_ids: list[str] = Field(default_factory=list, max_length=50)


class _LLMDerived(BaseModel):
    facts: list[_LLMFact] = Field(default_factory=list, max_length=100)
    preferences: list[_LLMPreference] = Field(default_factory=list, max_length=100)


DERIVE_PROMPT = """From the conversation messages below, extract durable facts about the user or the
world that the user stated, and the user's preferences. Cite the ids of the messages each one comes
from, using only ids listed. Return JSON {"facts": [{"subject", "predicate" (snake_case), "object",
"statement" (one sentence), "message_ids", "confidence" (0-1)}], "preferences": [{"category",
"value", "sentiment" ("like" or "dislike"), "statement", "message_ids"}]}. Use subject "user" for the
user; facts another named speaker states about themselves take that speaker's name as subject.
Preferences are the user's only. Return empty lists when there is nothing durable."""


def derive_llm(messages: list[Message]) -> Derived:
    valid = {m.id for m in messages}
    listing = "\n".join(
        f"[{m.id}] {m.role}{f' ({m.author_name})' if m.author_name else ''}: {m.text}" for m in messages
    )
    out = chat_json(
        [{"role": "system", "content": DERIVE_PROMPT}, {"role": "user", "content": listing}], _LLMDerived
    )
    derived = Derived(mode="llm")
    for fact in out.facts:
        ids = [i for i in fact.message_ids if i in valid]
        if ids:  # a fact citing no real message of this batch is not trusted
            derived.facts.append(
                FactCandidate(
                    fact.subject,
                    norm(fact.predicate).replace(" ", "_"),
                    fact.object,
                    fact.statement,
                    ids,
                    fact.confidence,
                )
            )
    for pref in out.preferences:
        ids = [i for i in pref.message_ids if i in valid]
        if ids:
            derived.preferences.append(
                PreferenceCandidate(
                    norm(pref.category) or "general", pref.value, pref.sentiment, pref.statement, ids
                )
            )
    return derived


def derive(messages: list[Message]) -> Derived:
    return derive_llm(messages) if llm_configured() else derive_extractive(messages)


# --- entity mentions -------------------------------------------------------------------------------

_GRAM_WORD = re.compile(r"[\w&+.-]+", re.UNICODE)


def mention_grams(text: str, *, max_n: int = 4, limit: int = 400) -> list[str]:
    """Normalised 1- to 4-word spans of `text`, the forms entity keys start with (knowledge's
    `normalise_name`); single stop words and one- or two-letter words are left out."""
    words = _GRAM_WORD.findall(normalise_name(text))
    grams: dict[str, None] = {}
    for n in range(1, max_n + 1):
        for start in range(0, len(words) - n + 1):
            span = words[start : start + n]
            if n == 1 and (len(span[0]) < 3 or span[0] in STOP_WORDS):
                continue
            if span[0] in STOP_WORDS or span[-1] in STOP_WORDS:
                continue
            grams[" ".join(span)] = None
            if len(grams) >= limit:
                return list(grams)
    return list(grams)


# --- conversation title and sentiment (seed 003) ---------------------------------------------------

SENTIMENTS = ("positive", "neutral", "negative", "mixed")
TITLE_MAX_CHARS = 80
# cue words of the extractive sentiment: a small lexicon, counted over the user's messages
_POSITIVE = frozenset(
    [
        "thanks",
        "thank",
        "great",
        "love",
        "loved",
        "like",
        "liked",
        "happy",
        "glad",
        "perfect",
        "excellent",
        "awesome",
        "helpful",
        "good",
        "nice",
        "wonderful",
        "amazing",
        "enjoy",
        "enjoyed",
        "fantastic",
        "brilliant",
        "pleased",
        "appreciate",
    ]
)
_NEGATIVE = frozenset(
    [
        "bad",
        "hate",
        "hated",
        "wrong",
        "angry",
        "annoyed",
        "terrible",
        "awful",
        "broken",
        "problem",
        "problems",
        "fail",
        "failed",
        "failing",
        "disappointed",
        "frustrated",
        "frustrating",
        "sad",
        "worse",
        "worst",
        "useless",
        "confusing",
        "upset",
    ]
)


class _Description(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    sentiment: str = Field(pattern=r"^(positive|neutral|negative|mixed)$")


DESCRIBE_PROMPT = (
    "Give this conversation a short title (at most 8 words) and its overall sentiment. Return JSON: "
    '{"title": "...", "sentiment": "positive" | "neutral" | "negative" | "mixed"}.'
)


def _title_extractive(messages: list[Message]) -> str:
    """The first user message's first sentence, cut at a word boundary."""
    first = next((m for m in messages if m.role == "user"), messages[0])
    sentence = next((s.strip() for s in _SENTENCES.split(first.text) if s.strip()), first.text.strip())
    if len(sentence) <= 60:
        return sentence
    return sentence[:60].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _sentiment_extractive(messages: list[Message]) -> str:
    words = [w.casefold() for m in messages if m.role == "user" for w in _WORD.findall(m.text)]
    positive = sum(w in _POSITIVE for w in words)
    negative = sum(w in _NEGATIVE for w in words)
    if positive and negative and min(positive, negative) * 2 >= max(positive, negative):
        return "mixed"
    if positive > negative:
        return "positive"
    if negative > positive:
        return "negative"
    return "neutral"


def describe(messages: list[Message]) -> tuple[str, str, str]:
    """(title, sentiment, mode) of a conversation: from the LLM when one is configured, else the first
    user sentence and a lexicon count."""
    if not llm_configured():
        return describe_extractive(messages)
    transcript = "\n".join(f"{m.role}: {m.text}" for m in messages)
    found = chat_json(
        [{"role": "system", "content": DESCRIBE_PROMPT}, {"role": "user", "content": transcript}],
        _Description,
    )
    return found.title.strip()[:TITLE_MAX_CHARS], found.sentiment, "llm"


def describe_extractive(messages: list[Message]) -> tuple[str, str, str]:
    return _title_extractive(messages)[:TITLE_MAX_CHARS], _sentiment_extractive(messages), "extractive"
