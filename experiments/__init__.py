"""Configs, the ``synbench`` CLI, runs, training, evaluation, tuning and launchers."""
