"""The maintenance layer: the kit every job is written with, the runner, review and undo.

Jobs themselves live in ``jobs/`` (installed as :mod:`memkeeper.jobs`); the runner loads that
registry only when it runs something, so importing this layer loads no job.
"""
