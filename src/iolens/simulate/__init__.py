"""The cluster simulator: realistic multi-layer monitoring data with known ground truth.

`simulate()` runs the contention engine over a generated workload and yields `Batch`es in
the forms real collectors produce; `truth` holds what only the simulator knows (each job's
I/O mode and exact bytes, injected faults, who interfered with whom) for tests to compare.
"""

from iolens.simulate.run import SimConfig, Simulation, simulate

__all__ = ["SimConfig", "Simulation", "simulate"]
