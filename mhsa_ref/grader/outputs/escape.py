"""Text a submission controls, made inert for each output format.

File and folder names, student ids, exception messages and anything else a submission chose may
hold backticks, HTML, newlines, control characters or a leading ``=``. Every writer passes such
text through one of these and never formats it into markup by hand.
"""

from __future__ import annotations

import re
import unicodedata

# Line breaks and controls (C0, C1, Unicode's line/paragraph separators, bidirectional overrides):
# in Markdown a line break inside an inline span lets the next line start a block (raw HTML, a
# heading); the bidi controls reorder what the reader sees.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: object) -> str:
    """``text`` on one line, every control character shown as an escape (``\\n``, ``\\x1b``)."""
    def show(m: re.Match) -> str:
        c = m.group()
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, f"\\u{ord(c):04x}" if ord(c) > 0xff else f"\\x{ord(c):02x}")

    return _UNSAFE.sub(show, str(text))


def md_code(text: object) -> str:
    """``text`` as a Markdown inline code span that nothing inside can close: the delimiter is
    one backtick longer than the longest run inside (CommonMark), padded where the text starts or
    ends with a backtick, on one line. Inside a code span nothing is HTML, a link or emphasis."""
    text = visible(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    tick = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{tick}{pad}{text}{pad}{tick}"


def md_fence(text: object, info: str = "text") -> str:
    """``text`` (several lines) in a fenced code block longer than any backtick run inside it."""
    text = str(text).replace("\r\n", "\n").replace("\r", "\n")
    # Tabs are harmless inside a fence; every other control is shown, not passed on.
    text = "\n".join(_UNSAFE.sub(lambda m: m.group() if m.group() == "\t" else visible(m.group()), line)
                     for line in text.split("\n"))
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


# A spreadsheet reads a cell starting with one of these as a formula (OWASP's CSV injection list,
# with the full-width forms some locales also accept).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_cell(value: object) -> object:
    """A spreadsheet cell that cannot be a formula: text that would start one (also after leading
    spaces) gets a leading apostrophe. Numbers the grader computed pass unchanged."""
    if not isinstance(value, str):
        return value
    stripped = unicodedata.normalize("NFKC", value.lstrip(" "))[:1]
    if value[:1] in _FORMULA_START or stripped in _FORMULA_START or value.lstrip(" ")[:1] in _FORMULA_START:
        return "'" + value
    return value


def md_table_code(text: object) -> str:
    """``md_code`` for a cell of a GitHub-flavoured Markdown table: a ``|`` inside would end the
    cell even within a code span, so it is escaped (GFM turns ``\\|`` back into ``|`` there)."""
    return md_code(text).replace("|", "\\|")
