"""Seed 000 checklist item 12: does a signal name something the submission did?

Three warnings, each a short rule that can be read off the text (README, "Signal checks"):

* SIGNAL_RESTATES_SCORE: the signal talks about a score instead of what happened: a score word used as a
  judgement (`scored`, `score of`, `rated`, `graded`, `rating`, `marks`, `deserves a ...`), a grade written as
  a fraction (`7/10`, `4 out of 5`) that no countable thing follows (`3 of 5 tests` is an observation), or
  points gained or lost (`lost 10 points`). Code identifiers (`compute_score()`, `score_row`) and the verb
  "points to / points out" do not count.
* SIGNAL_NOT_CONCRETE: no concrete marker once score talk is set aside. Markers: a number (a line, a count, a
  duration), a code-like token (`backticks`, `snake_case`, `camelCase`, `dotted.name`, `call()`, a path, a
  `--flag`), quoted text (an apostrophe inside a word is not a quote), or a named artefact of the work (line,
  test, function, file, commit, column, endpoint, flag, ...).
* GENERIC_SIGNAL: a stock phrase of praise or criticism ("good job", "room for improvement", "best practices")
  and nothing concrete besides: "Well done: the lock in worker.py is released in a finally block" is fine.
"""

from __future__ import annotations

import re

GENERIC_PHRASES = (
    "good understanding", "shows understanding", "shows a good understanding", "good job", "great job",
    "nice work", "great work", "good work", "well done", "solid work", "solid effort", "good effort",
    "overall good", "overall solid", "strong performance", "good performance", "well structured",
    "well-structured", "well organized", "well-organized", "needs improvement", "room for improvement",
    "could be better", "could be improved", "lacks depth", "lack of depth", "not bad", "decent work",
    "high quality", "meets expectations", "generally good", "mostly correct", "clean code", "best practices",
    "attention to detail", "easy to follow", "across the board", "minor issues", "a few issues",
    "some issues", "here and there",
)  # fmt: skip

_FRACTION = re.compile(r"\b\d{1,3}(?:\.\d+)?\s*(?:/|out of)\s*\d{1,3}\b(?!\s*(?:of\s+)?(?:the\s+)?[a-z]+s\b)", re.I)
_SCORE_WORDS = re.compile(
    r"(?<![\w`.])(?:scor(?:e|ed|es|ing)|rated|rating|grade[ds]?|graded|marks)\b(?![(_`])"
    r"|\b\d+\s+points?\b|\bdeserves\s+(?:a|an|\d)",
    re.I,
)
# "Rated the PR comments by severity": a verb with an object is not a score word; a score word is one that
# names a result: followed by a number, "of", an adverb of degree, "for", or standing as the subject ("the score").
_SCORE_JUDGEMENT = re.compile(
    r"(?<![\w`.])(?:scored|scores|score|rated|graded|rating|grade|marks)\b(?![(_`])"
    r"(?=\s*(?:[:\d]|of\b|as\b|is\b|well\b|highly\b|low\b|high\b|poorly\b|excellent\b|for\b|on\b|reflects\b|$))"
    r"|\b(?:high|low|perfect|full|top|good|bad)\s+(?:score|marks|grade|rating)\b"
    r"|\b\d+\s+points?\b|\bdeserves\s+(?:a|an|\d)",
    re.I,
)
# A score word with the number it gives ("Scored 85", "score of 90", "awarded 3 points"): those digits are a grade.
_GRADE_NUMBER = re.compile(
    r"\b(?:scor\w*|rated|graded|grade|rating|deserves|earns|gets|lost|awarded)\s+(?:a\s+|an\s+|of\s+)?"
    r"\d+(?:\.\d+)?(?:\s*points?)?",
    re.I,
)
_NUMBER = re.compile(r"\d")
_CODE = re.compile(
    r"`[^`]+`|\b\w+_\w+\b|\b[a-z]+[A-Z]\w*\b|\b\w+\.\w{1,5}\b|\b\w+\(\)|(?<!\w)/\w+|\b\w+/\w+|(?<!\w)--?\w[\w-]*"
)
_QUOTED = re.compile(r"\"[^\"]{2,}\"|(?<![\w])'[^']{2,}'(?![\w])")
_ARTEFACTS = re.compile(
    r"\b(?:line|lines|test|tests|function|method|file|files|commit|query|endpoint|column|table|migration|"
    r"variable|class|module|regex|loop|branch|diff|hunk|tool call|stack trace|exception|import|imports|"
    r"lock|index|flag|parameter|handler|readme|linter|suite|seed|timeout|port|header|retry|retries|cache|"
    r"comment|comments|pr|pull request)\b",
    re.I,
)


def restates_score(text: str) -> bool:
    return bool(_SCORE_JUDGEMENT.search(text) or _FRACTION.search(text))


def is_concrete(text: str) -> bool:
    """A concrete marker outside score talk (a grade's digits say nothing about the work)."""
    rest = _SCORE_JUDGEMENT.sub(" ", _GRADE_NUMBER.sub(" ", _FRACTION.sub(" ", text)))
    return bool(_NUMBER.search(rest) or _CODE.search(rest) or _QUOTED.search(rest) or _ARTEFACTS.search(rest))


def is_generic(text: str) -> bool:
    lowered = text.lower()
    return any(phrase in lowered for phrase in GENERIC_PHRASES) and not is_concrete(text)


def signal_codes(text: str) -> list[str]:
    """The checklist-12 warning codes one signal earns, in a fixed order."""
    codes = []
    if is_generic(text):
        codes.append("GENERIC_SIGNAL")
    if restates_score(text):
        codes.append("SIGNAL_RESTATES_SCORE")
    if not is_concrete(text):
        codes.append("SIGNAL_NOT_CONCRETE")
    return codes
