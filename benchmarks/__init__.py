"""skiplock's benchmark harness: `python -m benchmarks.run` (see docs/benchmarks.md)."""
