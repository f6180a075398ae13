"""Output formats a role asks its policy for, and how each is read back.

Each format wraps the part of a response that carries meaning: ``<answer>...</answer>`` for a
game move, ``<question>...</question>`` for a proposer, ``<score>...</score>`` for a judge,
``\\boxed{...}`` for a solver's final answer. Readers take the last well-formed occurrence
(models often restate a draft before committing) and return None when there is none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class TagFormat:
    """Content between ``<tag>`` and ``</tag>``."""

    tag: str

    @property
    def open(self) -> str:
        return f"<{self.tag}>"

    @property
    def close(self) -> str:
        return f"</{self.tag}>"

    def instruction(self, what: str) -> str:
        return f"Reply with {what} inside {self.open}{self.close}, e.g. {self.open}...{self.close}."

    def extract(self, text: str) -> str | None:
        matches = re.findall(rf"<{self.tag}>(.*?)</{self.tag}>", text, flags=re.DOTALL)
        if not matches:
            return None
        content = matches[-1].strip()
        return content or None

    def wrap(self, content: str) -> str:
        return f"{self.open}{content}{self.close}"


@dataclass(frozen=True)
class BoxedFormat:
    """Content of the last ``\\boxed{...}``, with nested braces balanced."""

    def instruction(self, what: str) -> str:
        return f"Put {what} in \\boxed{{}} at the end."

    def extract(self, text: str) -> str | None:
        start = text.rfind("\\boxed{")
        if start < 0:
            return None
        depth, i = 1, start + len("\\boxed{")
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                content = text[i:j].strip()
                return content or None
        return None

    def wrap(self, content: str) -> str:
        return f"\\boxed{{{content}}}"


ANSWER = TagFormat("answer")
QUESTION = TagFormat("question")
SCORE = TagFormat("score")
BOXED = BoxedFormat()
