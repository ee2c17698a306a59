"""airspeed velocity's suite for hdtwd: time and peak memory of the public API on generated data (benchmarks/README.md)."""
