"""Stanford basic (SD) and Universal (UD) dependencies from constituency trees, as CoreNLP converts them
(``EnglishGrammaticalStructure -basic`` / ``UniversalEnglishGrammaticalStructure -basic``; built and compared
at CoreNLP commit 1b7edd19 by ``benchmarks/parity_dependencies.py``).

The pipeline: ``reading`` (the tree as CoreNLP reads it), ``transforms`` (its restructurings),
``head_finders`` (its semantic head finders), ``convert`` (head words, raised objects, UD's cc attachment),
``labels`` (the relations) and ``upos`` (universal POS tags).
"""

from lightning_modules.data.dependency_schemes.convert import SCHEMES, convert

__all__ = ["SCHEMES", "convert"]
