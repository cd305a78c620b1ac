"""Executors that run an experiment's manifest: ``local``, ``slurm`` (sbatch arrays) and ``submitit``."""
