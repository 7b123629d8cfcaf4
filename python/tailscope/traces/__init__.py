"""Traces: the critical-path driver, the Jaeger query client (fetch only) and timelines."""
