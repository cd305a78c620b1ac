"""The CLI's argument parser: usage errors as one line. The checked argument types and the shared options
(``positive_int``, ``--device`` ...) live in ``experiments.cli_options``, read by commands and evaluators alike.
"""

from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """Usage errors as the one-line convention: ``synbench: error: MESSAGE`` and exit status 2."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        self.exit(2, f"synbench: error: {message}\n")
