"""``printable``: a value as text a terminal shows rather than acts on.

A job's error, a queue, task, worker or key name come from whoever enqueued or ran the job; an
escape sequence in one (``\\x1b]0;...\\x07``) retitles the terminal that prints it, and
``\\r\\x1b[2K`` rewrites the line it is on. Every line skiplock prints for a person (the CLI's
listings, ``stats``, its own log records in the plain format) passes through here, each such
character shown as its Python escape (``\\x1b``, ``\\r``). JSON output needs none of it: JSON
escapes every control character itself.
"""

from __future__ import annotations


def _escapes() -> dict[int, str]:
    """Each character a terminal acts on rather than shows, and what is printed instead: C0
    controls (ESC starts CSI and OSC sequences, BEL ends OSC, CR returns to the line's
    start), DEL, C1 controls (0x9b is a one-byte CSI), and the bidirectional marks, overrides
    and isolates and the Unicode line separators, which reorder or break what a line says."""
    codes = [*range(0x20), 0x7F, *range(0x80, 0xA0)]
    codes += [0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
    shown = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in codes}
    shown.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"})
    return shown


_ESCAPED = _escapes()
_ESCAPED_BUT_NEWLINE = {code: text for code, text in _ESCAPED.items() if code != 0x0A}


def printable(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control character shown as its escape (``\\x1b``, ``\\r``);
    ``multiline`` keeps newlines (a block printed over several lines on purpose: a traceback,
    an indented JSON document)."""
    return text.translate(_ESCAPED_BUT_NEWLINE if multiline else _ESCAPED)
