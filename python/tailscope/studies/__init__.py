"""Studies: sweeps of engine runs, each with a report section.

`base` says what a study is, `registry` lists them in run order, `common` holds what several
studies share. Each study is a module, or a package of run / analysis / section
(docs/architecture.md).
"""
