"""One module per ``synbench`` subcommand; each exposes ``register(subparsers)``.

Command modules stay thin (argument parsing and printing) and import heavy libraries (torch, pandas)
inside their handlers, so ``synbench --help`` is instant.
"""
