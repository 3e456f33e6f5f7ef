"""What is gathered, one package per layer as checks/ is (python/, gpu/, models/, serve/, fabric/, live/,
fix/: each collector `X.py` beside its `X_shapes.py`); here, what they share: the collector registry
(`sections`) and the run of the collectors (`collect`), the shape of a section (`shape`), safe reads of the
environment's files (`safefile`, `sourcefiles`, `pysource`), the secrets a report may not show (`secrets`),
the summary of an environment and its fingerprint (`envsummary`, `fingerprint`), and a process tree's end
(`proctree`). Beside them: the stdlib-only probe scripts (`probes/`) and the readers of files the stack ships
(`elf/`, `modelfiles/`)."""
