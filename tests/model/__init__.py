"""The semantics test: a pure-Python model of what the docs promise (``model``), the tasks and
recorder that let a real app report what it ran (``harness``), and the Hypothesis state machine
that drives both and fails on any difference (``test_semantics``)."""
