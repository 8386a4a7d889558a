"""Analyses over the store: per-job reports, I/O modes, time series, findings."""
