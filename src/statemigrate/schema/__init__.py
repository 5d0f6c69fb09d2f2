"""Schema upgrades in place: Alembic revisions that run on every engine, atomically.

The verbs are :mod:`statemigrate.api`'s (``statemigrate.upgrade``, ``downgrade``,
``stamp``, ``current``, ``check``, ``history``, ``revision``, ``finish_interrupted``);
a revision changes state through ``from statemigrate import op`` (:mod:`.op`).

Modules: :mod:`.scripts` (the Alembic revision graph), :mod:`.op` (what a revision
calls), :mod:`.staging` (copy-on-write tables while a revision runs), :mod:`.journal`
(the atomic switch and recovery), :mod:`.store` (the store a verb works on: found or
made, locked, not held by an app), :mod:`.runner` (the verbs that write),
:mod:`.queries` (those that do not), :mod:`.reports` (what they return), :mod:`.sort`
(the external sort of ``rekey``), :mod:`.errors`. Importing this package imports none
of them.
"""
