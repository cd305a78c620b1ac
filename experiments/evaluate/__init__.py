"""Evaluators: parse F1 (EVALB), SyntaxGym, BLiMP, and the results files they write.

Evaluators never touch a model directly: they take surprisals, log-probabilities or trees produced by a
Scorer (or read from files), so every model family and any external LM get the same protocol.
"""
