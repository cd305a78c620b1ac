"""The RNNG family's folder: the batched fixed-stack RNNG (``family.py``) and the Composition Attention Grammar
built on it (``cag.py``); importing the package registers both."""

from experiments.families.rnng import cag, family  # noqa: F401 (each registers its family)
