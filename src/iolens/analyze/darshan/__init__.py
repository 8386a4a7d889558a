"""Diagnosis of Darshan logs: Drishti's triggers (fixed) and the zoom-in root causes."""
