"""What extraction asks for, and the words its first sieve listens for: text, as data.

The ask is appended to the summarizing call's system prompt (one call, one answer, no extra
budget): besides the summary, the durable facts, preferences and decisions the USER stated,
each with a key, a value, a kind, a scope, a confidence and the ids of the messages that
state it. The marker lists are the seed's keyword rules (003 §3.2), used the other way round:
the model proposes, and a candidate whose every source sentence speaks of "this time" and
never of "from now on" is a session-only remark, whatever the model called it.

Pure text: no database, no network, no LLM client.
"""

from __future__ import annotations

EXTRACT_ANSWER = """\
Also list the durable memories THE USER stated in <transcript> (messages with role user \
only, never what the assistant said): stable facts about the user (name, job, employer, \
city...), lasting preferences ("from now on...", "I always...", "以后都..."), and decisions \
that stay valid after this conversation. Leave out moods and feelings, one-off remarks, \
small talk, and anything said about this conversation or task only ("this time I don't \
want a PDF" is not a lasting preference). For each memory give:
- "key": what it is about, not its value, as lowercase English snake_case (report_format, \
home_city, reply_style, employer); use the same key whenever the same thing is meant;
- "value": the value, short, in the user's own language;
- "kind": "fact", "preference" or "decision";
- "scope": "lasting", or "session" when it holds for this conversation only;
- "confidence": from 0 to 1, how sure you are that the user stated it as lasting;
- "message_ids": the numbers (#id) of the user messages that state it.

Answer with one JSON object and nothing else: {"summary": "<the summary>", "memories": \
[{"key": "report_format", "value": "PDF", "kind": "preference", "scope": "lasting", \
"confidence": 0.9, "message_ids": [12]}]}. "memories" is [] when the user stated nothing \
durable."""

KINDS_ASKED = ("fact", "preference", "decision")
"""The kinds the model may give; a decision is stored as a fact (it has a key and a value)."""

SESSION_MARKERS = (
    "this time",
    "this once",
    "just once",
    "for now",
    "for this one",
    "today",
    "tonight",
    "right now",
    "这次",
    "这一次",
    "这回",
    "本次",
    "今天",
    "今晚",
    "暂时",
    "先不",
)
"""Words of a remark about this session only (seed 003 §2.4: "我这次可不想再用PDF了")."""

LASTING_MARKERS = (
    "from now on",
    "going forward",
    "from today",
    "starting today",
    "always",
    "never",
    "every time",
    "in future",
    "in the future",
    "remember",
    "以后",
    "往后",
    "今后",
    "从今天",
    "今天起",
    "今天开始",
    "总是",
    "一直",
    "每次",
    "记住",
    "永远",
)
"""Words that make a statement lasting even beside a session marker (seed 003 §3.2's
"以后都", "记住")."""

MOOD_MARKERS = (
    "mood",
    "feeling",
    "emotion",
    "心情",
    "情绪",
    "感受",
)
"""Words in a candidate's key or value that make it a mood, not a memory (seed 003 §4.1:
"用户今天心情不错" is scene information)."""
