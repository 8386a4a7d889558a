"""Files a site installs to trace every job (no Python here): see docs/deploy-slurm.md.

`slurm/` holds the Slurm SPANK plug-in source, the TaskProlog snippet and the prolog/epilog
wrapper; `iolens site slurm-files DIR` writes them out, filled in, and builds the plug-in.
"""
