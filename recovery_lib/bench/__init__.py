"""Benchmarks: scripts that write JSON + PNG reports. Compare modes as ratios within one run."""
