"""The versioned engine: migration directories, the sum file, the history table, apply.

The in-Pod half of ``PtahMigration`` (the family that decides is
``ptah.families.migration``; this package only runs what it decides, as the runner's
``history`` and ``migrate`` operations in :mod:`ptah.runner.operations`). It is an
engine beside the declarative planner, not a package of its own: it opens nothing,
uses the same :class:`~ptah.engines.base.Target`, the same realm fence and the same
statement splitter (:mod:`ptah.engines.splitter`, which the planner's confinement reads
too), and like every engine it never imports the runner.

Modules, in the order a run uses them:

* :mod:`.directory` reads and merges one or more directories (one per ConfigMap);
* :mod:`.sumfile` writes and checks ``ptah.sum`` (edits, insertions, removals);
* :mod:`.dialects` holds every engine-specific statement: history table, transactions;
* :mod:`.history` compares history rows with the directory (pure);
* :mod:`.apply` applies pending files with per-statement progress where needed.

``ptah migrate`` (:mod:`ptah.cli.migrate`) is the same code for people.
"""
