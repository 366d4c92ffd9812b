"""Consolidation by meaning: duplicates found and merged, every change logged and undoable.

The ``merge`` job (``jobs/merge.py``, installed as ``memkeeper.jobs.merge``) is a thin
``run(ctx)``; its machinery is here, one concern per module:

* pure work, no database: :mod:`~memkeeper.consolidation.normalize` (what "the same value"
  means) and :mod:`~memkeeper.consolidation.grouping` (links, star-shaped groups, the
  overlapping note pairs; numpy for the similarities);
* the run: :mod:`~memkeeper.consolidation.candidates` (which users and namespaces, the
  watermark, one pair's entries and vectors), :mod:`~memkeeper.consolidation.merging` (a
  group's transitions, applied whole), :mod:`~memkeeper.consolidation.notes` (the LLM's note
  merges) and :mod:`~memkeeper.consolidation.job` (the order of work).

Nothing here is imported by ``import memkeeper``; numpy and the LLM SDK load only when used.
"""
