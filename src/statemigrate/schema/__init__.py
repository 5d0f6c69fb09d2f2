"""Schema upgrades in place: Alembic revisions that run on every engine, atomically.

The verbs are :mod:`statemigrate.api`'s (``statemigrate.upgrade``, ``downgrade``,
``stamp``, ``current``, ``check``, ``history``, ``revision``, ``finish_interrupted``);
a revision changes state through ``from statemigrate import op`` (:mod:`.op`).

Modules: :mod:`.scripts` (the Alembic revision graph), :mod:`.op` (what a revision
calls), :mod:`.staging` (copy-on-write tables while a revision runs),
:mod:`.journal` (the atomic switch and recovery), :mod:`.runner` (the verbs),
:mod:`.errors`. Importing this package imports none of them.
"""
