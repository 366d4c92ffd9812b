"""A clock a test moves by hand, for stores given ``clock=`` (never the wall clock)."""

from __future__ import annotations

from datetime import datetime, timedelta


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def __call__(self) -> datetime:
        return self.moment

    def tick(self, delta: timedelta) -> datetime:
        self.moment += delta
        return self.moment
