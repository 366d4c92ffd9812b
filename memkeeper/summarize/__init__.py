"""Summarizing long conversation histories into notes (MemGPT-style), with an LLM.

The job (``jobs/summarize.py``, installed as ``memkeeper.jobs.summarize``) is a thin
``run(ctx)``; its machinery is here, one concern per module:

* pure text work, no database and no network: :mod:`~memkeeper.summarize.tokens` (token
  estimates, the conversation's language), :mod:`~memkeeper.summarize.transcript` (messages
  as defused transcript entries, packed into chunks), :mod:`~memkeeper.summarize.prompt` (the
  prompts), :mod:`~memkeeper.summarize.plan` (one call, or chunks and folds, within the
  budget left), :mod:`~memkeeper.summarize.gate` (the quality gate), and extraction's
  :mod:`~memkeeper.summarize.extract_prompt` (the ask, the marker words),
  :mod:`~memkeeper.summarize.extract_gate` (the candidates' gate) and
  :mod:`~memkeeper.summarize.extract` (sieves 1 and 2: worth keeping, which kind and key);
* the run: :mod:`~memkeeper.summarize.session` (which sessions are due, what they hold),
  :mod:`~memkeeper.summarize.budget` (the run's caps on calls and tokens),
  :mod:`~memkeeper.summarize.summarizer` (one session: read, plan, call, check),
  :mod:`~memkeeper.summarize.commit` (the one transaction that writes a summary, and with
  it :mod:`~memkeeper.summarize.extract_commit`, sieve 3: conflict with what is stored),
  :mod:`~memkeeper.summarize.parking` (sessions the model will not summarize),
  :mod:`~memkeeper.summarize.job` (the pools, the counting, the errors),
  :mod:`~memkeeper.summarize.preview` (the dry run) and
  :mod:`~memkeeper.summarize.retention` (deleting long-summarized messages).

This package imports nothing eagerly; the LLM SDK loads only when a run creates its client.
"""
