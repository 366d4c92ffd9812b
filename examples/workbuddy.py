"""Seed 003's work assistant, workbuddy, on memkeeper.

workbuddy follows a user's projects across sessions. Its memory, as the seed lays it out:

* **A project per namespace.** ``/project acme`` switches project; every project entry and
  episode is written to and read from that namespace only, so one client's deadline never
  lands on another's project (seed 003 §4.1, "memory bleeding"). The user's profile
  (``/profile``: name, role) lives in the default namespace and applies to every project.
* **Episodes per task** (``/task NAME | INPUT | OUTPUT | FEEDBACK``): what went in, what came
  out and what the user changed afterwards, retrieved per project as a timeline in time
  order (``/timeline``; also the last section of the prompt's context), not one by one by
  similarity (§3.3).
* **Preferences with confidence and source** (§3.1): ``/prefer KEY VALUE`` is what the user
  said (confidence 0.95, source "stated by the user"); ``/infer KEY VALUE`` is a guess from
  past work (0.6, "inferred from past projects"), kept but left out of the prompt's prefill
  (``[context] min_confidence``, 0.7) until the user confirms it, which raises it to 0.95.
* **A changed preference keeps its old value through a grey period** (§3.2, §3.4): the new
  value is current at once, the old one ``superseded``; saying the old value again within
  ``[jobs.settle] grey_days`` (14) makes it current again — the same entry, its history
  intact (``/prefs`` shows every value with its state, ``/explain KEY`` its life).
  ``/wait DAYS`` moves this session's clock forward to show it: entries written after it
  carry the later time, so use it on a scratch ``--db``.
* **Retrieval by meaning** (§3.3): ``/search QUERY`` is :meth:`MemoryStore.search` (keywords,
  plus embeddings when an API key is set and the index job has run), and every chat message
  is answered with :meth:`MemoryStore.context` for that project and message as the system
  prompt. The short-term memory is the session's last 10 messages, kept in this process
  only: a session's small talk never becomes long-term memory (§2.4).
* **"Forget this project"** (``/forget-project``, §3.4): :meth:`MemoryStore.forget_namespace`
  erases the project's namespace — every entry (hot and cold, every state) with its
  change-log rows, the project's messages and episodes, their vectors and keyword-index
  content — leaving no byte of the text in either file. The user's profile and other
  projects are kept.

The model: GLM through ``zai-sdk`` (or ``zhipuai``) with ``ZHIPUAI_API_KEY``, or any
OpenAI-compatible server with ``--base-url``, exactly as in ``memory_agent.py``.

Usage::

    python examples/workbuddy.py --db /tmp/workbuddy.db --script examples/workbuddy.script
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path

from memory_agent import make_llm, turns

from memkeeper import MemkeeperError, MemoryStore, logs
from memkeeper.clock import system_now
from memkeeper.llm import LlmClient, LlmError

STATED, INFERRED = 0.95, 0.6
RECENT_MESSAGES = 10
PERSONA = (
    "You are workbuddy, a work assistant who follows the user's projects. Current project: "
    "{project}.\n\nWhat you remember:\n{memory}\n\nUse it; say so when you do not know."
)
HELP = (
    "commands: /project NAME, /profile KEY VALUE, /prefer KEY VALUE, /infer KEY VALUE, "
    "/task NAME | INPUT | OUTPUT | FEEDBACK, /timeline, /prefs, /explain KEY, /search QUERY, "
    "/wait DAYS, /forget-project, /quit"
)


class WorkBuddy:
    """The assistant: the commands above over one MemoryStore, one user, one project at a time."""

    def __init__(self, store: MemoryStore, llm: LlmClient | None, *, user: str) -> None:
        self.store = store
        self.llm = llm
        self.user = user
        self.project = ""
        self.offset = timedelta()
        self.recent: dict[str, list[dict[str, str]]] = {}  # per project, this process only
        store.clock = lambda: system_now() + self.offset

    # -- writing ------------------------------------------------------------------------------

    def switch(self, project: str) -> str:
        self.project = project.strip()
        episodes = self.store.episodes(self.user, namespace=self.project)
        return f"project {self.project}: {len(episodes)} earlier task(s)"

    def prefer(self, key: str, value: str, *, stated: bool, namespace: str | None = None) -> str:
        kind = "preference" if namespace is None else "fact"
        memory = self.store.remember(
            self.user,
            key,
            value,
            kind=kind,
            namespace=self.project if namespace is None else namespace,
            confidence=STATED if stated else INFERRED,
            source="stated by the user" if stated else "inferred from past projects",
        )
        where = f"project {memory.namespace}" if memory.namespace else "profile"
        return (
            f"{kind} {memory.key} = {memory.value} ({where}, confidence {memory.confidence:.2f},"
            f" source {memory.source!r}, entry {memory.id})"
        )

    def task(self, spec: str) -> str:
        name, input_summary, output_summary, feedback = ([*spec.split("|"), "", "", ""])[:4]
        episode = self.store.record_episode(
            self.user,
            name.strip(),
            namespace=self.project,
            input_summary=input_summary.strip(),
            output_summary=output_summary.strip(),
            user_feedback=feedback.strip(),
        )
        return f"task recorded in {self.project or '(no project)'}: {episode.task_name}"

    def wait(self, days: str) -> str:
        self.offset += timedelta(days=float(days))
        return f"{days} day(s) later: {self.store.now():%Y-%m-%d %H:%M} UTC"

    # -- reading ------------------------------------------------------------------------------

    def timeline(self) -> str:
        episodes = self.store.episodes(self.user, namespace=self.project)
        lines = [
            f"  {e.created_at:%Y-%m-%d %H:%M} {e.task_name}: {e.input_summary} -> "
            f"{e.output_summary}; feedback: {e.user_feedback or '-'}"
            for e in episodes
        ]
        return "\n".join([f"timeline of {self.project}:", *lines] if lines else ["no tasks yet"])

    def prefs(self) -> str:
        entries = self.store.list_memories(self.user, namespace=self.project, kind="preference")
        lines = [
            f"  {m.key} = {m.value}  [{m.state}] confidence {m.confidence:.2f}, "
            f"source {m.source!r}, entry {m.id}"
            for m in entries
        ]
        return "\n".join([f"preferences of {self.project}:", *(lines or ["  (none)"])])

    def explain(self, key: str) -> str:
        entries = [
            m for m in self.store.list_memories(self.user, namespace=self.project) if m.key == key
        ]
        if not entries:
            return f"no memory of {key!r} in {self.project}"
        return "\n".join(self.store.explain(m.id) for m in entries)

    def search(self, query: str) -> str:
        hits = self.store.search(self.user, query, namespace=self.project)
        lines = [
            f"  {h.score:.2f}  {h.memory.key or '(note)'} = {h.memory.value}  "
            f"(similarity {h.similarity:.2f}, keyword {h.keyword:.2f}, "
            f"confidence {h.confidence:.2f}, recency {h.recency:.2f})"
            for h in hits
        ]
        return "\n".join([f"found for {query!r}:", *lines] if lines else ["nothing found"])

    # -- forgetting a project -----------------------------------------------------------------

    def forget_project(self) -> str:
        """Erase the project: its entries, messages and episodes, with their history."""
        if not self.project:
            return "no project chosen: /project NAME first"
        erased = self.store.forget_namespace(self.user, self.project)
        self.recent.pop(self.project, None)
        return (
            f"forgot project {self.project}: {erased['memories']} entries and "
            f"{erased.get('episodes', 0)} episodes erased"
        )

    # -- a turn -------------------------------------------------------------------------------

    def chat(self, message: str) -> str:
        if self.llm is None:
            return "(no model: set ZHIPUAI_API_KEY, or --base-url for a local server)"
        context = self.store.context(self.user, namespace=self.project, query=message)
        system = PERSONA.format(
            project=self.project or "(none)", memory=context.text or "(nothing yet)"
        )
        recent = self.recent.setdefault(self.project, [])
        recent.append({"role": "user", "content": message})
        messages = [{"role": "system", "content": system}, *recent[-RECENT_MESSAGES:]]
        try:
            answer = self.llm.complete(messages, max_tokens=500).text.strip()
        except LlmError as exc:
            return f"(the model did not answer: {exc})"
        recent.append({"role": "assistant", "content": answer})
        return answer

    def handle(self, line: str) -> str:
        command, _, rest = line.partition(" ")
        rest = rest.strip()
        key, _, value = rest.partition(" ")
        try:
            match command:
                case "/project":
                    return self.switch(rest)
                case "/profile":
                    return self.prefer(key, value.strip(), stated=True, namespace="")
                case "/prefer" | "/infer":
                    return self.prefer(key, value.strip(), stated=command == "/prefer")
                case "/task":
                    return self.task(rest)
                case "/timeline":
                    return self.timeline()
                case "/prefs":
                    return self.prefs()
                case "/explain":
                    return self.explain(rest)
                case "/search":
                    return self.search(rest)
                case "/wait":
                    return self.wait(rest)
                case "/forget-project":
                    return self.forget_project()
                case _ if command.startswith("/"):
                    return HELP
                case _:
                    return self.chat(line)
        except (MemkeeperError, ValueError, OverflowError) as exc:
            return f"error: {exc}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="memory database (default: memkeeper's own)")
    parser.add_argument("--user", default="me", help="whose memory (default: me)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server instead of Zhipu's")
    parser.add_argument("--model", help="model name (default: [llm] model, glm-4.7-flash)")
    parser.add_argument("--script", type=Path, help="read the turns from this file")
    args = parser.parse_args(argv)
    logs.configure(level="warning")  # memkeeper's warnings to stderr; the chat on stdout
    try:
        store = MemoryStore(args.db)
    except MemkeeperError as exc:
        print(f"workbuddy: {exc}", file=sys.stderr)
        return exc.exit_code
    with store:
        llm = make_llm(store, args.base_url, args.model)
        buddy = WorkBuddy(store, llm, user=args.user)
        try:
            for line in turns(args.script):
                if line in ("/quit", "/exit"):
                    break
                print(f"workbuddy> {buddy.handle(line)}")
        finally:
            if llm is not None:
                llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
