"""SentencePiece unigram subword models trained on training terminals, with word <-> piece alignment.

TG §3 tokenizes with a SentencePiece unigram model (Kudo 2018), 32K pieces on BLLIP-LG. The model is
trained in memory (no files) and serialised as its model proto (``to_bytes``), so a checkpoint embeds the
exact tokenizer it was trained with.

**Word boundaries.** Each word is encoded on its own, so a piece never spans two words. As in
SentencePiece's own output, the first piece of every word carries the boundary marker ``▁`` (U+2581) as its
first character: either fused with text (``▁the``) or as a piece of its own (``▁`` followed by ``61``). A
word whose normalised form is empty (e.g. a lone zero-width space) is encoded as the single piece ``▁``, so
every word has at least one piece. Encoding the words one by one gives the same pieces as encoding the
space-joined sentence (whitespace already splits pieces in SentencePiece); the per-word call only makes the
alignment explicit. Evaluation sums the log-probabilities of the pieces that share a word index.

**Text.** Pieces are normalised text (``nmt_nfkc`` by default, as ``spm_train``; ``…`` becomes ``...``).
Characters outside the model's alphabet become the ``<unk>`` id but keep their surface in the piece strings,
so ``decode(pieces)`` reproduces the normalised text exactly, while decoding ids renders them as ``⁇``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

import sentencepiece as spm

from lightning_modules.errors import InputError

BOUNDARY = "\u2581"  # ▁, SentencePiece's whitespace / word-start marker
# Special ids as in TG's prepare_data.sh (pad 0, <s> 1, </s> 2, <unk> 3); user-defined symbols follow.
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


class SentencePieceModel:
    """A trained SentencePiece model plus word-aligned encoding."""

    def __init__(self, model_proto: bytes):
        self._proto = bytes(model_proto)
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(self._proto)
        except (RuntimeError, OSError) as e:
            raise InputError(f"not a SentencePiece model: {e}") from None

    @classmethod
    def train(
        cls,
        sentences: Iterable[Sequence[str]],
        vocab_size: int,
        user_defined_symbols: Sequence[str] = (),
        character_coverage: float = 1.0,
        normalization_rule_name: str = "nmt_nfkc",
        byte_fallback: bool = False,
        num_threads: int = 1,
        max_sentence_length: int = 100_000,
    ) -> SentencePieceModel:
        """Train a unigram model on training sentences (each a sequence of words).

        ``vocab_size`` counts every piece including the four specials and ``user_defined_symbols`` (TG
        passes the nonterminals there so they share one id space with the pieces). Training reads every
        sentence (no sampling, so no shuffling seed is involved) and uses ``num_threads=1`` by default:
        the trained model is then byte-identical run to run and machine to machine (the EM statistics
        depend on the thread count). ``character_coverage=1.0`` and ``max_sentence_length`` (in bytes)
        follow TG's ``prepare_data.sh``.
        """
        buf = io.BytesIO()
        text = (" ".join(words) for words in sentences)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=text,
                model_writer=buf,
                model_type="unigram",
                vocab_size=vocab_size,
                character_coverage=character_coverage,
                normalization_rule_name=normalization_rule_name,
                byte_fallback=byte_fallback,
                pad_id=PAD_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                unk_id=UNK_ID,
                user_defined_symbols=list(user_defined_symbols),
                num_threads=num_threads,
                max_sentence_length=max_sentence_length,
                input_sentence_size=0,
                minloglevel=2,
            )
        except RuntimeError as e:  # e.g. "Vocabulary size is too high" for a small corpus
            raise InputError(f"SentencePiece training failed: {e}", "vocab_size") from None
        return cls(buf.getvalue())

    # -- serialisation -------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The model proto (what ``spm_train`` writes as ``.model``)."""
        return self._proto

    @classmethod
    def from_bytes(cls, model_proto: bytes) -> SentencePieceModel:
        return cls(model_proto)

    def __reduce__(self) -> tuple:
        # pickled as its proto, so data-loader worker processes can receive it
        return (SentencePieceModel, (self._proto,))

    # -- vocabulary ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._sp.GetPieceSize()

    def piece_to_id(self, piece: str) -> int:
        return self._sp.PieceToId(piece)

    def id_to_piece(self, index: int) -> str:
        return self._sp.IdToPiece(index)

    def normalize(self, text: str) -> str:
        """The model's normalisation of ``text``, with ``▁`` for spaces and a leading ``▁``."""
        return self._sp.Normalize(text)

    # -- encoding ------------------------------------------------------------------------------------
    def encode_words(self, words: Sequence[str]) -> tuple[list[str], list[int]]:
        """Pieces of ``words`` and, for each piece, the index of the word it belongs to (0-based)."""
        return self._encode(words, str, BOUNDARY)

    def encode_words_as_ids(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """As ``encode_words`` with piece ids (characters outside the alphabet become ``UNK_ID``)."""
        return self._encode(words, int, self._sp.PieceToId(BOUNDARY))

    def _encode(self, words: Sequence[str], out_type: type, empty: str | int) -> tuple[list, list[int]]:
        pieces: list = []
        word_index: list[int] = []
        for i, word_pieces in enumerate(self._sp.Encode(list(words), out_type=out_type)):
            word_pieces = word_pieces or [empty]
            pieces.extend(word_pieces)
            word_index.extend([i] * len(word_pieces))
        return pieces, word_index

    def decode(self, pieces: Sequence[str] | Sequence[int]) -> str:
        """Detokenize pieces (strings or ids) into text; ``▁`` becomes a space, the leading one is dropped."""
        return self._sp.Decode(list(pieces))

    def detokenize_words(self, words: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
        """The detokenized text of ``words`` and each word's ``(start, end)`` character offsets in it.

        The text equals ``decode(encode_words(words)[0])``: the normalised words joined by single spaces.
        """
        pieces, word_index = self.encode_words(words)
        per_word: list[list[str]] = [[] for _ in words]
        for piece, i in zip(pieces, word_index):
            per_word[i].append(piece)
        surfaces = self._sp.Decode(per_word) if per_word else []
        offsets: list[tuple[int, int]] = []
        start = 0
        for surface in surfaces:
            offsets.append((start, start + len(surface)))
            start += len(surface) + 1
        return " ".join(surfaces), offsets
