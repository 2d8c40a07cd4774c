"""What the suite's tests share: the fixtures, names and rollbacks, threads and
child processes, crash points, repeated trials, and the ``--via aio`` facade.

Internal to the kit: a test of the suite imports these; an engine author does not.
"""
