"""``memkeeper bench``: a large generated database, a maintenance pass against its floor.

Nothing here is imported by ``import memkeeper`` or by another command: the CLI imports it
inside the ``bench`` command. :mod:`~memkeeper.bench.run` runs the measurements in order;
:mod:`~memkeeper.bench.generate` makes the database, :mod:`~memkeeper.bench.floor` writes the
same changes as plain set-based SQL, :mod:`~memkeeper.bench.workers` are the child processes
(the pass runner and the agents), :mod:`~memkeeper.bench.measure` the in-process
measurements and :mod:`~memkeeper.bench.report` the targets and the table.
"""
