"""Benchmarks and paper-table regeneration drivers."""
