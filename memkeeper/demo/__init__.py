"""`memkeeper demo`.

A year of a few agents' use, maintained on schedule in a temporary database:
:mod:`~memkeeper.demo.agents` (what the agents do each day), :mod:`~memkeeper.demo.schedule`
(the jobs' cron triggers on a simulated clock), :mod:`~memkeeper.demo.standin` (summaries
without an API key), :mod:`~memkeeper.demo.stories` (the undo and the ``explain`` stories),
:mod:`~memkeeper.demo.run` (the simulation and its counts) and :mod:`~memkeeper.demo.report`
(the text output).
"""
