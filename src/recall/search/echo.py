"""Echoes: stored turns that only ask something and got no answer.

Every question a user asks is stored as a turn with whatever the reply was. Asked again, that
turn is the closest text there is, by meaning and by keywords, and it outranks the memory that
answers it (LoCoMo's repeated-question regime: first 100% of the time; docs/benchmarks.md).
Other unanswered questions crowd the results the same way. Such a turn holds nothing to
remember, so searches leave it out before ranking: its user text is a question and its reply
says nothing new (a "not sure" answer, a bare acknowledgement such as "Noted.", or no word the
question did not have). The reply is judged by its own part, the sentences that restate the
memories it quotes left out (decision 0038): a question answered only by quoting a memory holds
nothing the memory does not. It stays stored, and listed by `recent`, until erased.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = [
    "CACHED_TEXTS",
    "WORD",
    "is_acknowledgement",
    "is_question",
    "is_small_talk",
    "is_unanswered",
    "terms",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
"""A word of lower-cased English text, with its contraction ("i'm", "don't")."""
_QUESTION_WORDS = _words(
    "what when where who whom whose why how which did does do is are was were would "
    "could can will should has have had may might shall"
)
_UNINFORMATIVE = re.compile(
    r"^\W*(i'?m not (sure|certain)|i am not (sure|certain)|not sure|i don'?t know|i do not know|"
    r"no idea|i have no (idea|information)|i can'?t (say|tell|remember)|"
    r"i cannot (say|tell|remember)|"
    r"i (can'?t|cannot|am unable to|don'?t have|do not have) (see |check |access |browse )?"
    r"(live|real-time|current|the internet|internet)|"
    r"sorry,? i don'?t (know|have|remember))\b",
    re.IGNORECASE,
)
# a reply made of these words only acknowledges ("Noted.", "OK", "Got it.", "Sure!", "Thanks",
# "Okay, noted."): it says nothing, whatever the question. "yes" and "no" answer a question.
_ACKNOWLEDGING = _words(
    "noted note ok okay k got it sure thanks thank you understood alright all right cool great "
    "good to know gotcha i'll remember that you told me said mentioned"
)
# small talk: greetings, thanks, farewells and the like, and what a reply to them says ("Hello!
# How can I help today?", "You're welcome!"); a turn made of these words only holds no fact
_PHATIC = _ACKNOWLEDGING | _words(
    "hi hello hey hiya howdy yo morning afternoon evening night day bye goodbye later see soon "
    "take care talk cheers ty thx welcome you're nice awesome perfect lovely wonderful helpful "
    "that's lol haha hah hmm wow doing fine well glad help hear anything else today again "
    "now there i'm we're happy pleasure lot lots much kind appreciate appreciated grateful "
    "thankful brilliant excellent fantastic amazing super sweet greetings everyone what's up"
)
# what a reply says to small talk and to nothing else ("Anytime!", "Anything else?", "See
# ya!", "Karibu!"): a short message answered with these words only is small talk, whatever its
# own words are ("kia ora", "choice", "ta"); an acknowledgement ("Noted.", "Got it.") is not
# among them, as it answers a statement
_SOCIAL = _words(
    "anytime welcome worries else hi hello hey hiya bye goodbye later see ya soon night "
    "goodnight cheers glad pleasure help helped haha ha indeed karibu nada enjoy"
)
_SOCIAL_REPLY = (_PHATIC - _ACKNOWLEDGING) | _SOCIAL | _words("anything")
_SHORT = 3  # the most words a message answered only socially has
_REPEATED = re.compile(r"(.)\1+")  # a letter said again and again: "heyy", "hiii", "byeee"

# function words, which say nothing new in a reply (a short English list: PostgreSQL's own is
# not reachable from here, floor 1)
_STOP = _words(
    "a an the and or but if of to in on at by for with about from as into over after "
    "before is are was were be been being am do does did have has had i me my mine we "
    "our you your he him his she her it its they them their this that these those there "
    "here what when where who whom whose why how which not no so than then too very can "
    "could will would should shall may might must just also any some all"
)


# A memory's own facts do not depend on the query, and the same memories come back search after
# search: each is judged once per process and text (issue 36). Bounded: texts are at most a
# few kB, and a busy process keeps its users' recent candidates.
CACHED_TEXTS = 8192


def terms(text: str) -> frozenset[str]:
    """A text's content words, lower-cased."""
    return frozenset(w for w in WORD.findall(text.lower()) if w not in _STOP)


@lru_cache(maxsize=CACHED_TEXTS)
def is_question(text: str) -> bool:
    """Whether `text` asks something: it ends with "?" or starts with a question word."""
    stripped = text.strip()
    if stripped.endswith("?"):
        return True
    first = WORD.match(stripped.lower())
    return first is not None and first.group(0) in _QUESTION_WORDS


def is_acknowledgement(text: str) -> bool:
    """Whether `text` only acknowledges ("Noted.", "OK", "Got it.", "Sure!", "Thanks", "Okay,
    noted."): it has a word, and every word is one of a short list of such words."""
    words = WORD.findall(text.lower())
    return bool(words) and all(w in _ACKNOWLEDGING for w in words)


@lru_cache(maxsize=CACHED_TEXTS)
def is_unanswered(user_message: str, ai_response: str, own: str | None = None) -> bool:
    """Whether the stored turn only asks something and got no answer: its user text is a
    question and its reply says nothing new (a "not sure" answer, a bare acknowledgement, or
    no word the question did not have). Such a turn holds nothing to remember, whatever the
    query.

    Args:
        user_message: the turn's user text.
        ai_response: its reply.
        own: the reply's own part where one was recorded (`recall.memory.own_words`): the
            reply is judged by it, its quotes of other memories left out.
    """
    if not is_question(user_message):  # the cheap test first: most turns are not questions
        return False
    said = terms(user_message)
    if not said:
        return False
    reply = ai_response if own is None else own
    return (
        bool(_UNINFORMATIVE.search(reply)) or is_acknowledgement(reply) or not (terms(reply) - said)
    )


def _drawn_out(word: str) -> str:
    """A word as small talk's lists hold it: as written where they do, else with its
    drawn-out letters said once ("heyy" -> "hey", "hiii" -> "hi"; "good" stays "good")."""
    if word in _SOCIAL_REPLY or word in _STOP or word in _ACKNOWLEDGING:
        return word
    squeezed = _REPEATED.sub(r"\1", word)
    return squeezed if squeezed in _SOCIAL_REPLY or squeezed in _ACKNOWLEDGING else word


@lru_cache(maxsize=CACHED_TEXTS)
def is_small_talk(user_message: str, ai_response: str, own: str | None = None) -> bool:
    """Whether the stored turn is small talk on both sides: every word of the user's text is a
    greeting, a thanks, a farewell or a function word ("hi there!", "good morning!", "thanks,
    that's helpful", "heyy": a drawn-out word counts as itself) and so is every word of the
    reply that the user's text does not hold
    ("Noted.", "Hello! How can I help today?", "You're welcome!"); or the user's text is a
    short statement (at most three words, no digit) that the reply only answers socially, as
    one answers a greeting or a thanks ("kia ora" -> "Kia ora! What can I help with?", "ta" ->
    "Anytime!"; not "Noted.", which answers a statement). Such a turn holds nothing to
    remember, whatever the query: a greeting asked again would find it first (issue 45).

    Args:
        user_message: the turn's user text.
        ai_response: its reply.
        own: the reply's own part where one was recorded (`recall.memory.own_words`).
    """
    said = [_drawn_out(w) for w in WORD.findall(user_message.lower())]
    if not said:
        return False
    reply = [_drawn_out(w) for w in WORD.findall((ai_response if own is None else own).lower())]
    if all(w in _PHATIC or w in _STOP for w in said):
        return all(w in _PHATIC or w in _STOP or w in said for w in reply)
    # a short message the reply only answers socially ("kia ora" -> "Kia ora! What can I help
    # with?", "choice" -> "Anything else?")
    return (
        len(said) <= _SHORT
        and not is_question(user_message)
        and not any(c.isdigit() for c in user_message)
        and any(w in _SOCIAL for w in reply)
        and all(w in _SOCIAL_REPLY or w in _STOP or w in said for w in reply)
    )
