"""Versioned migrations: directory, sum file, history table, apply.

Modules, in the order a run uses them:

* :mod:`.directory` reads and merges one or more directories (one per ConfigMap);
* :mod:`.sumfile` writes and checks ``ptah.sum`` (edits, insertions, removals);
* :mod:`.splitter` cuts files into statements without rewriting them;
* :mod:`.dialects` holds every engine-specific statement: history table, locks;
* :mod:`.history` compares history rows with the directory (pure);
* :mod:`.apply` applies pending files with per-statement progress where needed;
* :mod:`.ops` is the runner's ``history``/``migrate`` with one result frame.

``ptah migrate`` (:mod:`ptah.cli.migrate`) is the same code for people.
"""
