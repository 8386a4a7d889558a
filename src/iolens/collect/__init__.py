"""Collect: the node agent and its sources (one file each under sources/)."""
