"""Measurements: histograms (.hlog), tail analysis, typed measurements."""
