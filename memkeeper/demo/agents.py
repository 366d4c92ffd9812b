"""The demo's agents: a year of the seeds' assistants using memkeeper, one day at a time.

* ``chat`` — seed 000's MemoryAgent for the user ``xiaoming``: facts about him (the name
  pinned), a reply-style preference, evening chats in a weekly session (long histories for
  the summarize job), reminders as notes, a birthday that changes a fact, and "forget how
  old I am" (an erasure).
* ``workbuddy`` — seed 003's work assistant for ``zhou``: a namespace per project, an episode
  per task, preferences with confidence and source (stated 0.95, inferred 0.35-0.6), a
  preference changed and changed back inside its grey period, another changed for good,
  a project that ends (its entries go unused) and one the user asks to forget entirely.
* ``reader`` — a reading assistant for ``lin`` that files every book as a fact: more than
  the per-user cap of facts, so the prune job has work; inferred genre preferences at low
  confidence for the demote job.

Every choice comes from the seeded ``random.Random``: the same seed gives the same year.
:meth:`Agents.day` returns the day's actions as ``(time, actor, action)``; the simulation
runs the scheduled jobs due before each one, then sets the clock and calls it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta

from memkeeper.store import MemoryStore

Action = tuple[datetime, str, Callable[[], None]]
Tally = Callable[[str, int], None]

STATED, INFERRED, LOW = 0.95, 0.6, (0.35, 0.4, 0.45)
SUBJECTS = ("math", "science", "English", "history", "music")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
TEACHERS = ("Chen", "Wang", "Li", "Zhao")
ANIMALS = ("panda", "fox", "dragon", "cat")
PLACES = ("science museum", "West Lake", "zoo", "library")
FRIENDS = ("Xiaohong", "Tao", "Lele")
HOBBIES = ("chess", "drawing", "football")
TASKS = ("weekly report", "client email", "slide deck", "data cleanup", "meeting notes")
FEEDBACK = ("", "", "shorter intro please", "add a chart", "use the client's terms")
INFERRED_PREFS = {
    "chart_style": ("bar charts", "line charts"),
    "meeting_slot": ("mornings", "after lunch"),
    "summary_length": ("one paragraph", "three bullets"),
    "font": ("serif", "sans-serif"),
}
GENRES = ("science fiction", "history", "poetry", "mystery")
PROJECTS = {  # namespace: (first day, last day, chance of a task on a workday)
    "atlas": (0, 10_000, 0.7),
    "borealis": (0, 150, 0.5),
    "cobalt": (20, 210, 0.5),
}


class Agents:
    """The three agents' behaviour; ``tally(what, n)`` counts what they did this month."""

    def __init__(self, store: MemoryStore, rng: random.Random, tally: Tally) -> None:
        self.store = store
        self.rng = rng
        self.tally = tally
        self.marks: dict[str, str] = {}
        """Memory ids the stories explain: ``changed back``, ``forgotten``."""
        self.birthday = 45 + rng.randrange(30)
        self.change_back = (40 + rng.randrange(10), 5 + rng.randrange(6))
        self.forget_age = 200 + rng.randrange(20)
        self.forget_project = 211 + rng.randrange(10)
        self.books = 0

    def _as(self, actor: str) -> MemoryStore:
        self.store.actor = f"agent:{actor}"
        return self.store

    def _at(self, day: datetime, first_hour: int, last_hour: int) -> datetime:
        """A time on ``day`` between the two hours, to the minute."""
        minutes = self.rng.randrange(first_hour * 60, last_hour * 60)
        return day + timedelta(minutes=minutes)

    def day(self, index: int, day: datetime) -> list[Action]:
        """The actions of day ``index`` of the simulation (``day`` is its local midnight)."""
        actions: list[Action] = []
        rng = self.rng
        if index == 0:
            actions.append((self._at(day, 8, 9), "chat", self.chat_setup))
            actions.append((self._at(day, 9, 10), "reader", self.reader_setup))
        if index == self.birthday:
            actions.append((self._at(day, 7, 8), "chat", self.chat_birthday))
        if rng.random() < 0.55:
            exchanges = 3 + rng.randrange(6)
            actions.append((self._at(day, 18, 21), "chat", lambda: self.chat(day, exchanges)))
        if index == self.forget_age:
            actions.append((self._at(day, 21, 22), "chat", self.chat_forget_age))
        if day.weekday() < 5:
            for namespace, (first, last, chance) in PROJECTS.items():
                if index == first:
                    actions.append(
                        (self._at(day, 9, 10), "workbuddy", lambda n=namespace: self.project(n))
                    )
                if first <= index <= last and rng.random() < chance:
                    actions.append(
                        (self._at(day, 10, 17), "workbuddy", lambda n=namespace: self.task(n))
                    )
        changed, back = self.change_back
        if index == changed:
            actions.append((self._at(day, 17, 18), "workbuddy", self.change_format))
        if index == changed + back:
            actions.append((self._at(day, 17, 18), "workbuddy", self.change_format_back))
        if index == 70:
            actions.append((self._at(day, 17, 18), "workbuddy", self.change_deliverable))
        if index == self.forget_project:
            actions.append((self._at(day, 17, 18), "workbuddy", self.forget_cobalt))
        if rng.random() < 0.6:
            actions.append((self._at(day, 21, 23), "reader", self.read))
        return sorted(actions, key=lambda action: action[0])

    # -- chat: seed 000's MemoryAgent ----------------------------------------------------------

    def chat_setup(self) -> None:
        store = self._as("chat")
        store.remember(
            "xiaoming", "name", "Xiaoming", confidence=STATED, source="chat", pinned=True
        )
        facts = {
            "age": "10",
            "city": "Hangzhou",
            "school": "Qiushi Primary",
            "favourite_subject": "math",
        }
        for key, value in facts.items():
            store.remember("xiaoming", key, value, confidence=STATED, source="chat")
        store.remember(
            "xiaoming",
            "reply_style",
            "short answers with one example",
            kind="preference",
            confidence=STATED,
            source="chat",
        )
        self.tally("written", len(facts) + 2)

    def chat_birthday(self) -> None:
        store = self._as("chat")
        store.remember("xiaoming", "age", "11", confidence=STATED, source="chat: birthday")
        self.tally("written", 1)

    def chat_forget_age(self) -> None:
        store = self._as("chat")
        current = store.recall("xiaoming", "age")
        if current is not None:
            self.marks["forgotten"] = current.id
        self.tally("forgotten", store.forget("xiaoming", "age"))

    def _user_line(self) -> str:
        rng = self.rng
        a, b = rng.randrange(2, 10), rng.randrange(2, 10)
        return rng.choice(
            (
                f"I have a {rng.choice(SUBJECTS)} test on {rng.choice(WEEKDAYS)}.",
                f"Can you help with my {rng.choice(SUBJECTS)} homework? It is page "
                f"{rng.randrange(10, 90)}.",
                f"Ms. {rng.choice(TEACHERS)} said we should read {rng.randrange(10, 30)} "
                "pages a day.",
                f"Tell me a story about a {rng.choice(ANIMALS)}.",
                f"I finished {rng.randrange(5, 20)} math problems today!",
                f"We decided to visit the {rng.choice(PLACES)} on {rng.choice(WEEKDAYS)}.",
                f"What is {a} times {b}?",
                f"Remember that my friend {rng.choice(FRIENDS)} likes {rng.choice(HOBBIES)}.",
                "I am a bit tired today.",
            )
        )

    def _reply(self, said: str) -> str:
        if "times" in said:
            a, b = (int(word) for word in said.rstrip("?").split() if word.isdigit())
            return f"{a} times {b} is {a * b}."
        if "test" in said:
            return "Good luck! Let's review the key points together tonight."
        if "story" in said:
            return "Once upon a time, a brave animal found a map to a hidden garden..."
        return self.rng.choice(("Great job, keep going!", "Okay, I will remember that.", "Sure."))

    def chat(self, day: datetime, exchanges: int) -> None:
        store = self._as("chat")
        store.recall("xiaoming", "name")
        recalls = 1
        for key, chance in (("reply_style", 0.8), ("city", 0.02), ("favourite_subject", 0.05)):
            if self.rng.random() < chance:
                store.recall("xiaoming", key, kind="preference" if key == "reply_style" else None)
                recalls += 1
        year, week, _ = day.isocalendar()
        session = f"chat-{year}-w{week:02d}"
        for _ in range(exchanges):
            said = self._user_line()
            store.append_message("xiaoming", session, "user", said)
            store.append_message("xiaoming", session, "assistant", self._reply(said))
        self.tally("recalled", recalls)
        self.tally("messages", 2 * exchanges)
        if self.rng.random() < 0.12:
            subject, weekday = self.rng.choice(SUBJECTS), self.rng.choice(WEEKDAYS)
            store.add_note("xiaoming", f"Reminder: {subject} test on {weekday}", source="chat")
            self.tally("written", 1)

    # -- workbuddy: seed 003's work assistant ---------------------------------------------------

    def project(self, namespace: str) -> None:
        store = self._as("workbuddy")
        client = f"{namespace.capitalize()} Corp"
        store.remember("zhou", "client", client, namespace=namespace, confidence=STATED)
        fmt = "PDF" if namespace == "borealis" else "markdown tables"
        key = "deliverable_format" if namespace == "borealis" else "report_format"
        first = store.remember(
            "zhou",
            key,
            fmt,
            namespace=namespace,
            kind="preference",
            confidence=STATED,
            source="stated by the user",
        )
        if namespace == "atlas":
            self.marks["changed back"] = first.id
        store.remember(
            "zhou",
            "tone",
            "formal",
            namespace=namespace,
            kind="preference",
            confidence=INFERRED,
            source="inferred from edits",
        )
        self.tally("written", 3)

    def task(self, namespace: str) -> None:
        store = self._as("workbuddy")
        rng = self.rng
        key = "deliverable_format" if namespace == "borealis" else "report_format"
        store.recall("zhou", key, namespace=namespace, kind="preference")
        store.recall("zhou", "client", namespace=namespace)
        task = rng.choice(TASKS)
        store.record_episode(
            "zhou",
            task,
            namespace=namespace,
            input_summary=f"{task} for {namespace}, week {self.store.now():%V}",
            output_summary=f"{task} delivered, {rng.randrange(2, 9)} sections",
            user_feedback=rng.choice(FEEDBACK),
        )
        self.tally("recalled", 2)
        self.tally("episodes", 1)
        if rng.random() < 0.1:
            pref = rng.choice(sorted(INFERRED_PREFS))
            store.remember(
                "zhou",
                pref,
                rng.choice(INFERRED_PREFS[pref]),
                namespace=namespace,
                kind="preference",
                confidence=rng.choice(LOW),
                source="inferred from one edit",
            )
            self.tally("written", 1)

    def change_format(self) -> None:
        store = self._as("workbuddy")
        store.remember(
            "zhou",
            "report_format",
            "bullet lists",
            namespace="atlas",
            kind="preference",
            confidence=STATED,
            source="stated by the user",
        )
        self.tally("written", 1)

    def change_format_back(self) -> None:
        store = self._as("workbuddy")
        store.remember(
            "zhou",
            "report_format",
            "markdown tables",
            namespace="atlas",
            kind="preference",
            confidence=STATED,
            source="stated by the user: back to tables",
        )
        self.tally("written", 1)

    def change_deliverable(self) -> None:
        store = self._as("workbuddy")
        store.remember(
            "zhou",
            "deliverable_format",
            "slides",
            namespace="borealis",
            kind="preference",
            confidence=STATED,
            source="stated by the user",
        )
        self.tally("written", 1)

    def forget_cobalt(self) -> None:
        """The user's "forget this project": every entry of the namespace, erased."""
        store = self._as("workbuddy")
        erased = 0
        keys = set()
        for memory in store.list_memories("zhou", namespace="cobalt"):
            if memory.key is None:
                erased += store.forget_memory(memory.id)
            else:
                keys.add(memory.key)
        for key in sorted(keys):
            erased += store.forget("zhou", key, namespace="cobalt")
        self.tally("forgotten", erased)

    # -- reader: a reading assistant filing every book as a fact --------------------------------

    def reader_setup(self) -> None:
        store = self._as("reader")
        store.remember("lin", "reading_goal", "two books a month", namespace="reading")
        self.tally("written", 1)

    def read(self) -> None:
        store = self._as("reader")
        rng = self.rng
        self.books += 1
        store.remember(
            "lin",
            f"book:{self.books:03d}",
            f"Book {self.books} ({rng.choice(GENRES)})",
            namespace="reading",
            confidence=0.7,
            source="reading log",
        )
        written = 1
        if self.books > 5 and rng.random() < 0.3:
            earlier = rng.randrange(max(1, self.books - 40), self.books)
            store.recall("lin", f"book:{earlier:03d}", namespace="reading")
            self.tally("recalled", 1)
        if rng.random() < 0.08:
            store.remember(
                "lin",
                "favourite_genre",
                rng.choice(GENRES),
                namespace="reading",
                kind="preference",
                confidence=rng.choice(LOW),
                source="inferred from the log",
            )
            written += 1
        self.tally("written", written)
