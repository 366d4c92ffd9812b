"""Seed 000's MemoryAgent (Day 16), rebuilt on memkeeper.

The seed's agent keeps two layers of memory: a short-term list of the conversation and a
long-term ``agent_memory.json`` of facts and notes, injected into the system prompt on every
turn. Here both live in memkeeper's database instead:

* ``/remember KEY VALUE``, ``/recall KEY``, ``/forget KEY`` and ``/note TEXT`` are the seed's
  commands, now :meth:`MemoryStore.remember`, :meth:`~MemoryStore.recall` (which marks the
  fact used, so the maintenance service knows it matters), :meth:`~MemoryStore.forget`
  (erased with no residue) and :meth:`~MemoryStore.add_note`.
* Long-term memory reaches the model through :meth:`MemoryStore.context` with the user's
  message as the query: the best facts, preferences and notes, plus the entries relevant to
  what the user just said, instead of every fact the seed had.
* Short-term memory is the session's history (:meth:`~MemoryStore.append_message`,
  :meth:`~MemoryStore.history`): the newest 10 messages go to the model, as in the seed, and
  they survive a restart. Summarizing a long history is left to the maintenance service
  (``memkeeper run`` or ``memkeeper run-once --job summarize``): it folds the older messages
  into a summary note, which then reaches the prompt through ``context``, and ``history``
  stops returning the folded messages.
* The seed's old ``agent_memory.json`` is imported on first start (``memkeeper import``'s
  importer, so the same checks apply) and then renamed ``agent_memory.json.imported``.

The model is Zhipu's GLM through the ``zai-sdk`` SDK (or ``zhipuai``) with
``ZHIPUAI_API_KEY``, or any OpenAI-compatible server with ``--base-url`` (a local server
without keys needs no key).
The client is memkeeper's own (``[llm]`` settings of the config file; ``--model`` and
``--base-url`` override them).

Usage::

    python examples/memory_agent.py                          # chat; /quit to leave
    python examples/memory_agent.py --script turns.script    # one turn per line
    python examples/memory_agent.py --db /tmp/agent.db --user xiaoming \\
        --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from memkeeper import MemkeeperError, MemoryStore, logs
from memkeeper.llm import LlmClient, LlmError
from memkeeper.store.transfer import import_file

RECENT_MESSAGES = 10  # the seed's history[-10:]
SYSTEM_PROMPT = """You are an assistant with a memory.

Your long-term memory:
{memory}

Rules:
- Use what you remember naturally in your answers.
- If the user asks whether you remember something, look in the memory above.
- Keep answers short and friendly."""


class MemoryAgent:
    """The seed's agent: a chat loop over memkeeper's long- and short-term memory."""

    def __init__(
        self, store: MemoryStore, llm: LlmClient | None, *, user: str, session: str
    ) -> None:
        self.store = store
        self.llm = llm
        self.user = user
        self.session = session

    # -- the seed's commands ------------------------------------------------------------------

    def remember(self, key: str, value: str) -> str:
        memory = self.store.remember(
            self.user, key, value, source="chat:/remember", confidence=0.95
        )
        return f"remembered: {memory.key} = {memory.value}"

    def recall(self, key: str) -> str:
        memory = self.store.recall(self.user, key)
        if memory is None:
            return f"no memory of {key!r}"
        return f"recalled: {memory.key} = {memory.value}"

    def forget(self, key: str) -> str:
        erased = self.store.forget(self.user, key)
        if not erased:
            return f"no memory of {key!r}"
        return f"forgotten: {key} ({erased} value(s) erased, history included)"

    def add_note(self, text: str) -> str:
        self.store.add_note(self.user, text, source="chat:/note")
        return f"noted: {text}"

    # -- a turn of conversation ---------------------------------------------------------------

    def system_prompt(self, message: str) -> str:
        """The seed's prompt, with memkeeper's context for this message as the memory."""
        context = self.store.context(self.user, query=message)
        return SYSTEM_PROMPT.format(memory=context.text or "(nothing yet)")

    def chat(self, message: str) -> str:
        """Record the message, answer it from the recent history and the memory, record that."""
        if self.llm is None:
            return "(no model: set ZHIPUAI_API_KEY, or --base-url for a local server)"
        self.store.append_message(self.user, self.session, "user", message)
        recent = self.store.history(self.user, self.session, limit=RECENT_MESSAGES)
        messages = [{"role": "system", "content": self.system_prompt(message)}]
        messages += [{"role": m.role, "content": m.content} for m in recent]
        try:
            answer = self.llm.complete(messages, max_tokens=500).text.strip()
        except LlmError as exc:
            return f"(the model did not answer: {exc})"
        self.store.append_message(self.user, self.session, "assistant", answer or "(empty)")
        return answer

    def handle(self, line: str) -> str:
        """One line typed by the user: a command or a chat message."""
        command, _, rest = line.partition(" ")
        rest = rest.strip()
        try:
            if command == "/remember":
                key, value = split_key_value(rest)
                return self.remember(key, value)
            if command == "/recall":
                return self.recall(rest)
            if command == "/forget":
                return self.forget(rest)
            if command == "/note":
                return self.add_note(rest)
            if command.startswith("/"):
                return "commands: /remember KEY VALUE, /recall KEY, /forget KEY, /note TEXT, /quit"
            return self.chat(line)
        except (MemkeeperError, ValueError) as exc:
            return f"error: {exc}"


def split_key_value(text: str) -> tuple[str, str]:
    """``KEY VALUE`` or ``KEY=VALUE`` (the seed's ``/remember 用户名 梅雅达``)."""
    key, value = text.split("=", 1) if "=" in text else (*text.split(None, 1), "", "")[:2]
    if not key.strip() or not value.strip():
        raise ValueError("usage: /remember KEY VALUE")
    return key.strip(), value.strip()


def import_old_memory(store: MemoryStore, path: Path, user: str) -> str | None:
    """Import the seed's agent_memory.json once, then rename it ``.imported``."""
    if not path.is_file():
        return None
    report = import_file(store, path, user_id=user)
    done = path.with_name(path.name + ".imported")
    path.replace(done)
    return (
        f"imported {path.name}: {report.created} new, {report.unchanged} already known"
        f" (the file is now {done.name})"
    )


def make_llm(store: MemoryStore, base_url: str | None, model: str | None) -> LlmClient | None:
    """memkeeper's LLM client for chat (plain text answers); None without a key."""
    changes: dict[str, object] = {"json_mode": False}
    if base_url:
        changes["base_url"] = base_url
    if model:
        changes["model"] = model
    config = store.config.llm.model_copy(update=changes)
    key = os.environ.get(config.api_key_env, "").strip()
    if not key and config.base_url:
        key = "local"  # an OpenAI-compatible server without keys still wants a bearer token
    if not key:
        return None
    return LlmClient(config, api_key=key, max_connections=1)


def turns(script: Path | None) -> Iterator[str]:
    """The user's lines: the script's (blank lines and ``#`` comments skipped), or typed."""
    if script is not None:
        for line in script.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                print(f"you> {line.strip()}")
                yield line.strip()
        return
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            return
        if line:
            yield line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="memory database (default: memkeeper's own)")
    parser.add_argument("--user", default="me", help="whose memory (default: me)")
    parser.add_argument("--session", default="chat", help="conversation id (default: chat)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server instead of Zhipu's")
    parser.add_argument("--model", help="model name (default: [llm] model, glm-4.7-flash)")
    parser.add_argument(
        "--memory-file",
        type=Path,
        default=Path("agent_memory.json"),
        help="the seed agent's old memory, imported on first start (default: %(default)s)",
    )
    parser.add_argument("--script", type=Path, help="read the turns from this file")
    args = parser.parse_args(argv)
    logs.configure(level="warning")  # memkeeper's warnings to stderr; the chat on stdout
    try:
        store = MemoryStore(args.db)
    except MemkeeperError as exc:
        print(f"memory_agent: {exc}", file=sys.stderr)
        return exc.exit_code
    with store:
        try:
            imported = import_old_memory(store, args.memory_file, args.user)
        except MemkeeperError as exc:
            print(f"memory_agent: {exc}", file=sys.stderr)
            return exc.exit_code
        if imported:
            print(imported)
        llm = make_llm(store, args.base_url, args.model)
        agent = MemoryAgent(store, llm, user=args.user, session=args.session)
        try:
            for line in turns(args.script):
                if line in ("/quit", "/exit"):
                    break
                print(f"assistant> {agent.handle(line)}")
        finally:
            if llm is not None:
                llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
