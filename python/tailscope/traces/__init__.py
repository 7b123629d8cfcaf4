"""Traces: the spans of trace files (`spans`, read by the engine), the critical-path driver, the Jaeger
query client (fetch only) and timelines."""
