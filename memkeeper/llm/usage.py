"""Counting LLM use: what a piece of work used (:class:`Usage`), and what a run may still
spend (:class:`Budget`)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from memkeeper.llm.answer import LlmAnswer
from memkeeper.llm.errors import LlmError


@dataclass
class Usage:
    """Calls and tokens used: HTTP attempts (each counts against the call budget), the
    answers they brought back, the tokens those answers report, and the model that answered.
    """

    attempts: int = 0
    answers: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def retries(self) -> int:
        """Attempts that brought back no answer."""
        return self.attempts - self.answers

    def add(self, answer: LlmAnswer) -> None:
        """Count an answer and the attempts it took."""
        self.attempts += answer.attempts
        self.answers += 1
        self.prompt_tokens += answer.prompt_tokens
        self.completion_tokens += answer.completion_tokens
        self.model = self.model or answer.model

    def add_failure(self, error: LlmError) -> None:
        """Count the attempts of a call that ended in ``error``."""
        self.attempts += error.attempts


class Budget:
    """Per-run caps on LLM calls and tokens, globally and per user (thread-safe).

    A unit of work first :meth:`reserve`\\ s its estimated calls and tokens (an upper bound);
    when it is done it :meth:`settle`\\ s with what it actually used. Work that cannot reserve
    waits for the next run. What counts against a cap is what was used plus what is reserved.
    """

    def __init__(
        self,
        max_calls: int,
        max_tokens: int,
        max_calls_per_user: int,
        max_tokens_per_user: int,
    ) -> None:
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.max_calls_per_user = max_calls_per_user
        self.max_tokens_per_user = max_tokens_per_user
        self._calls = 0
        self._tokens = 0
        self._user_calls: Counter[str] = Counter()
        self._user_tokens: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _left(self, user_id: str) -> tuple[int, int]:
        calls = min(
            self.max_calls - self._calls,
            self.max_calls_per_user - self._user_calls[user_id],
        )
        tokens = min(
            self.max_tokens - self._tokens,
            self.max_tokens_per_user - self._user_tokens[user_id],
        )
        return calls, tokens

    def _count(self, user_id: str, calls: int, tokens: int) -> None:
        self._calls += calls
        self._tokens += tokens
        self._user_calls[user_id] += calls
        self._user_tokens[user_id] += tokens

    def reserve(self, user_id: str, calls: int, tokens: int) -> bool:
        """Set aside ``calls`` and ``tokens`` for ``user_id``; False (nothing reserved) if over."""
        with self._lock:
            calls_left, tokens_left = self._left(user_id)
            if calls > calls_left or tokens > tokens_left:
                return False
            self._count(user_id, calls, tokens)
            return True

    def settle(
        self, user_id: str, reserved_calls: int, reserved_tokens: int, calls: int, tokens: int
    ) -> None:
        """Release a reservation and record what was actually used."""
        with self._lock:
            self._count(user_id, calls - reserved_calls, tokens - reserved_tokens)

    def remaining(self, user_id: str) -> tuple[int, int]:
        """Calls and tokens ``user_id`` could still reserve in this run."""
        with self._lock:
            calls, tokens = self._left(user_id)
            return max(calls, 0), max(tokens, 0)
