"""SD and UD converters: golden sentences whose expected columns are CoreNLP's own output, and the reading.

Each golden case is a PTB-sample tree as written in the corpus and, per word, ``FORM SD-HEAD SD-DEPREL
UD-HEAD UD-DEPREL UPOS`` exactly as CoreNLP (commit 1b7edd19, ``EnglishGrammaticalStructure -basic -conllx``
and ``UniversalEnglishGrammaticalStructure -basic -conllx``) printed them. Together the cases exercise every
restructuring rule (flat NP coordination, UCP relabelling, QP and money splitting, X-over-X removal, adverb
movement, raised objects, UD multiword expressions, *according to* and *not only*, UD's cc re-attachment) and
every relation of both label sets that the PTB sample's fully matching sentences contain (17 sentences;
three synthetic trees, converted by the same build, add QP coordination, *up to* and *not only*)."""

from __future__ import annotations

import pytest

from lightning_modules.data.dependency_schemes import convert
from lightning_modules.data.dependency_schemes.reading import basic_category, dependency_label, read_tree
from lightning_modules.data.tree import parse_tree
from lightning_modules.errors import InputError

GOLDEN = [
    # wsj_0118.mrg:562
    ('( (S (NP-SBJ (PRP$ Its) (JJ new) (NNS products) (CC and) (NN trading) (NNS techniques)) (VP (VBP have) '
     '(VP (VBN been) (ADJP-PRD (RB highly) (JJ profitable)))) (. .)))',
     """\
     Its 3 poss 3 nmod:poss PRON
     new 3 amod 3 amod ADJ
     products 10 nsubj 10 nsubj NOUN
     and 3 cc 6 cc CCONJ
     trading 6 nn 6 compound NOUN
     techniques 3 conj 3 conj NOUN
     have 10 aux 10 aux AUX
     been 10 cop 10 cop AUX
     highly 10 advmod 10 advmod ADV
     profitable 0 root 0 root ADJ
     . 10 punct 10 punct PUNCT
     """),
    # wsj_0113.mrg:556
    ('( (S (NP-SBJ-1 (NNS Payments)) (VP (VBP are) (VP (VBN expected) (S (NP-SBJ (-NONE- *-1)) (VP (TO to) '
     '(VP (VB range) (PP (IN between) (NP (NP (QP ($ $) (CD 9) (CD billion)) (-NONE- *U*)) (CC and) (NP (QP '
     '($ $) (CD 12) (CD billion)) (-NONE- *U*))))))) (NP-TMP (DT this) (NN year)))) (. .)))',
     """\
     Payments 3 nsubjpass 3 nsubj:pass NOUN
     are 3 auxpass 3 aux:pass AUX
     expected 0 root 0 root VERB
     to 5 aux 5 mark PART
     range 3 xcomp 3 xcomp VERB
     between 5 prep 7 case ADP
     $ 6 pobj 5 obl SYM
     9 9 number 9 compound NUM
     billion 7 num 7 nummod NUM
     and 7 cc 11 cc CCONJ
     $ 7 conj 7 conj SYM
     12 13 number 13 compound NUM
     billion 11 num 11 nummod NUM
     this 15 det 15 det DET
     year 3 tmod 3 obl:tmod NOUN
     . 3 punct 3 punct PUNCT
     """),
    # wsj_0178.mrg:260
    ('( (S (NP-SBJ-1 (NNP Steinberg)) (VP (VBD sought) (NP (NP (NN clearance)) (SBAR (WHADVP-2 (-NONE- 0)) '
     '(S (NP-SBJ (-NONE- *)) (VP (TO to) (VP (VB buy) (NP (NP (QP (JJR more) (IN than) (CD 15)) (NN %)) (PP '
     "(IN of) (NP (NP (NNP United) (NNP Air) (POS 's)) (NN parent)))) (ADVP (-NONE- *T*-2))))))) (, ,) "
     '(S-ADV (NP-SBJ (-NONE- *-1)) (VP (VBG saying) (SBAR (-NONE- 0) (S (NP-SBJ (PRP he)) (VP (MD may) (VP '
     '(VB seek) (NP (NN control))))))))) (. .)))',
     """\
     Steinberg 2 nsubj 2 nsubj PROPN
     sought 0 root 0 root VERB
     clearance 2 dobj 2 obj NOUN
     to 5 aux 5 mark PART
     buy 3 vmod 3 acl VERB
     more 7 mwe 8 advmod ADJ
     than 8 quantmod 6 fixed ADP
     15 9 num 9 nummod NUM
     % 5 dobj 5 obj SYM
     of 9 prep 14 case ADP
     United 12 nn 12 compound PROPN
     Air 14 poss 14 nmod:poss PROPN
     's 12 possessive 12 case PART
     parent 10 pobj 9 nmod NOUN
     , 2 punct 2 punct PUNCT
     saying 2 vmod 2 advcl VERB
     he 19 nsubj 19 nsubj PRON
     may 19 aux 19 aux AUX
     seek 16 ccomp 16 ccomp VERB
     control 19 dobj 19 obj NOUN
     . 2 punct 2 punct PUNCT
     """),
    # wsj_0059.mrg:421
    ('( (S (NP-SBJ (NP (PRP It)) (SBAR (-NONE- *EXP*-1))) (VP (VBZ remains) (ADJP-PRD (JJ unclear)) (SBAR-1 '
     '(IN whether) (S (NP-SBJ-2 (DT the) (NN bond) (NN issue)) (VP (MD will) (VP (VB be) (VP (VBN rolled) '
     '(NP (-NONE- *-2)) (PRT (RP over)))))))) (. .)))',
     """\
     It 2 nsubj 2 nsubj PRON
     remains 0 root 0 root VERB
     unclear 2 acomp 2 xcomp ADJ
     whether 10 mark 10 mark SCONJ
     the 7 det 7 det DET
     bond 7 nn 7 compound NOUN
     issue 10 nsubjpass 10 nsubj:pass NOUN
     will 10 aux 10 aux AUX
     be 10 auxpass 10 aux:pass AUX
     rolled 2 ccomp 2 ccomp VERB
     over 10 prt 10 compound:prt ADP
     . 2 punct 2 punct PUNCT
     """),
    # wsj_0091.mrg:211
    ('( (NP (NP (NNP Oliver) (NNP Berliner)) (NP-LOC (NP (NNP Beverly) (NNP Hills)) (, ,) (NP (NNP Calif))) (. .)))',
     """\
     Oliver 2 nn 2 compound PROPN
     Berliner 0 root 0 root PROPN
     Beverly 4 nn 4 compound PROPN
     Hills 2 dep 2 dep PROPN
     , 4 punct 4 punct PUNCT
     Calif 4 appos 4 appos PROPN
     . 2 punct 2 punct PUNCT
     """),
    # wsj_0060.mrg:467
    ("( (S (NP-SBJ (EX There)) (VP (VBD was) (RB n't) (NP-PRD (-NONE- *?*))) (. .) ('' '')))",
     """\
     There 2 expl 2 expl PRON
     was 0 root 0 root VERB
     n't 2 neg 2 advmod PART
     . 2 punct 2 punct PUNCT
     '' 2 punct 2 punct PUNCT
     """),
    # wsj_0120.mrg:379
    ('( (S (S-NOM-SBJ (NP-SBJ (-NONE- *)) (VP (VBG DIALING) (NP (CD 900)))) (VP (VBZ brings) (NP (NNS '
     'callers)) (NP (NP (DT a) (VBG growing) (NN number)) (PP (IN of) (NP (NNS services))))) (. .)))',
     """\
     DIALING 3 csubj 3 csubj VERB
     900 1 dobj 1 obj NUM
     brings 0 root 0 root VERB
     callers 3 iobj 3 iobj NOUN
     a 7 det 7 det DET
     growing 7 amod 7 amod VERB
     number 3 dobj 3 obj NOUN
     of 7 prep 9 case ADP
     services 8 pobj 7 nmod NOUN
     . 3 punct 3 punct PUNCT
     """),
    # wsj_0098.mrg:471
    ('( (S (NP-SBJ (DT The) (NN training) (NN wage)) (VP (VBZ covers) (ADVP (JJ only)) (NP (NP (NNS '
     'workers)) (SBAR (WHNP-260 (WP who)) (S (NP-SBJ (-NONE- *T*-260)) (VP (VBP are) (ADJP-PRD (NP-ADV (QP '
     '(CD 16) (TO to) (CD 19)) (NNS years)) (JJ old))))))) (. .)))',
     """\
     The 3 det 3 det DET
     training 3 nn 3 compound NOUN
     wage 4 nsubj 4 nsubj NOUN
     covers 0 root 0 root VERB
     only 4 advmod 4 advmod ADJ
     workers 4 dobj 4 obj NOUN
     who 13 nsubj 13 nsubj PRON
     are 13 cop 13 cop AUX
     16 11 number 11 compound NUM
     to 11 dep 11 dep ADP
     19 12 num 12 nummod NUM
     years 13 npadvmod 13 obl:npmod NOUN
     old 6 rcmod 6 acl:relcl ADJ
     . 4 punct 4 punct PUNCT
     """),
    # wsj_0198.mrg:198
    ('( (S (NP-SBJ (DT The) (CD two) (NNS professors)) (VP (VBD said) (SBAR (-NONE- 0) (S (NP-SBJ (DT the) '
     '(NNP Constitution)) (VP (VBZ authorizes) (S (NP-SBJ (DT the) (NN president)) (VP (TO to) (VP (VB veto) '
     '(NP (NP (JJ entire) (NNS bills)) (, ,) (RB not) (NP (JJ partial) (NNS measures)))))))))) (. .)))',
     """\
     The 3 det 3 det DET
     two 3 num 3 nummod NUM
     professors 4 nsubj 4 nsubj NOUN
     said 0 root 0 root VERB
     the 6 det 6 det DET
     Constitution 7 nsubj 7 nsubj PROPN
     authorizes 4 ccomp 4 ccomp VERB
     the 9 det 9 det DET
     president 7 dobj 7 obj NOUN
     to 11 aux 11 mark PART
     veto 7 xcomp 7 xcomp VERB
     entire 13 amod 13 amod ADJ
     bills 11 dobj 11 obj NOUN
     , 13 punct 13 punct PUNCT
     not 17 neg 17 advmod ADV
     partial 17 amod 17 amod ADJ
     measures 13 appos 13 appos NOUN
     . 4 punct 4 punct PUNCT
     """),
    # wsj_0179.mrg:322
    ("( (S (NP-SBJ (NNP Columbia)) (VP (MD wo) (RB n't) (VP (VB comment) (PP-CLR (IN on) (NP (PDT all) (DT "
     'the) (NN speculation))))) (. .)))',
     """\
     Columbia 4 nsubj 4 nsubj PROPN
     wo 4 aux 4 aux AUX
     n't 4 neg 4 advmod PART
     comment 0 root 0 root VERB
     on 4 prep 8 case ADP
     all 8 predet 8 det:predet DET
     the 8 det 8 det DET
     speculation 5 pobj 4 obl NOUN
     . 4 punct 4 punct PUNCT
     """),
    # wsj_0036.mrg:776
    ('( (S (S (NP-SBJ (DT The) (NN goverment)) (VP (VBZ counts) (NP (NN money)) (SBAR-TMP (IN as) (S '
     '(NP-SBJ-53 (PRP it)) (VP (VBZ is) (VP (VBN spent) (NP (-NONE- *-53)))))))) (: ;) (S (NP-SBJ (NNP '
     'Dodge)) (VP (VBZ counts) (NP (NNS contracts)) (SBAR-TMP (WHADVP-1 (WRB when)) (S (NP-SBJ-54 (PRP '
     'they)) (VP (VBP are) (VP (VBN awarded) (NP (-NONE- *-54)) (ADVP-TMP (-NONE- *T*-1)))))))) (. .)))',
     """\
     The 2 det 2 det DET
     goverment 3 nsubj 3 nsubj NOUN
     counts 0 root 0 root VERB
     money 3 dobj 3 obj NOUN
     as 8 mark 8 mark SCONJ
     it 8 nsubjpass 8 nsubj:pass PRON
     is 8 auxpass 8 aux:pass AUX
     spent 3 advcl 3 advcl VERB
     ; 3 punct 3 punct PUNCT
     Dodge 11 nsubj 11 nsubj PROPN
     counts 3 parataxis 3 parataxis VERB
     contracts 11 dobj 11 obj NOUN
     when 16 advmod 16 advmod ADV
     they 16 nsubjpass 16 nsubj:pass PRON
     are 16 auxpass 16 aux:pass AUX
     awarded 11 advcl 11 advcl VERB
     . 3 punct 3 punct PUNCT
     """),
    # wsj_0120.mrg:649
    ('( (SQ (FRAG (ADJP (JJ TIRED) (PP (IN OF) (S-NOM (NP-SBJ (-NONE- *)) (VP (VBG TRIMMING))))) (. ?))))',
     """\
     TIRED 0 root 0 root ADJ
     OF 1 prep 3 mark SCONJ
     TRIMMING 2 pcomp 1 advcl VERB
     ? 1 punct 1 punct PUNCT
     """),
    # wsj_0103.mrg:75
    ('( (S (NP-SBJ (NNP OSHA)) (VP (VBD cited) (NP (NP (QP (RB nearly) (CD 1,500)) (VBN alleged) (NNS '
     'violations)) (PP (IN of) (NP (JJ federal) (UCP (JJ electrical) (, ,) (NN crane-safety) (, ,) (NN '
     'record-keeping) (CC and) (JJ other)) (NNS requirements))))) (. .)))',
     """\
     OSHA 2 nsubj 2 nsubj PROPN
     cited 0 root 0 root VERB
     nearly 4 quantmod 4 advmod ADV
     1,500 6 num 6 nummod NUM
     alleged 6 amod 6 amod VERB
     violations 2 dobj 2 obj NOUN
     of 6 prep 16 case ADP
     federal 16 amod 16 amod ADJ
     electrical 16 amod 16 amod ADJ
     , 9 punct 9 punct PUNCT
     crane-safety 9 conj 9 conj NOUN
     , 9 punct 9 punct PUNCT
     record-keeping 9 conj 9 conj NOUN
     and 9 cc 15 cc CCONJ
     other 9 conj 9 conj ADJ
     requirements 7 pobj 6 nmod NOUN
     . 2 punct 2 punct PUNCT
     """),
    # wsj_0118.mrg:3990
    ('( (SBARQ (WHADVP-1 (WRB How)) (SQ (VBZ does) (NP-SBJ (NP (DT a) (JJ nice) (JJ new) (NN tax)) (PRN (, '
     ',) (INTJ (VB say)) (NP (CD 5) (NN %)) (, ,)) (PP (IN on) (NP (DT any) (JJ financial) (NN '
     'transaction)))) (VP (VB sound) (ADVP-CLR (-NONE- *T*-1)))) (. ?)))',
     """\
     How 16 advmod 16 advmod ADV
     does 16 aux 16 aux AUX
     a 6 det 6 det DET
     nice 6 amod 6 amod ADJ
     new 6 amod 6 amod ADJ
     tax 16 nsubj 16 nsubj NOUN
     , 10 punct 10 punct PUNCT
     say 10 discourse 10 discourse VERB
     5 10 num 10 nummod NUM
     % 6 dep 6 dep SYM
     , 10 punct 10 punct PUNCT
     on 6 prep 15 case ADP
     any 15 det 15 det DET
     financial 15 amod 15 amod ADJ
     transaction 12 pobj 6 nmod NOUN
     sound 0 root 0 root VERB
     ? 16 punct 16 punct PUNCT
     """),
    # wsj_0097.mrg:664
    ('( (S (ADVP (JJ First)) (, ,) (NP-SBJ-1 (DT the) (NN trading)) (VP (VP (VP (VBZ is) (VP (VBN done) (NP '
     "(-NONE- *-1)) (PP-LOC (IN over) (NP (DT the) (NN counter)))))) (CC and) (VP (VP (VBZ is) (RB n't) (VP "
     '(VBN reported) (NP (-NONE- *-1)) (PP-LOC (IN on) (NP (CC either) (DT the) (NNP U.S.) (CC or) (NNP '
     'London) (NN stock) (NN trading) (NNS tapes))))))) (. .)))',
     """\
     First 6 advmod 6 advmod ADJ
     , 6 punct 6 punct PUNCT
     the 4 det 4 det DET
     trading 6 nsubjpass 6 nsubj:pass NOUN
     is 6 auxpass 6 aux:pass AUX
     done 0 root 0 root VERB
     over 6 prep 9 case ADP
     the 9 det 9 det DET
     counter 7 pobj 6 obl NOUN
     and 6 cc 13 cc CCONJ
     is 13 auxpass 13 aux:pass AUX
     n't 13 neg 13 advmod PART
     reported 6 conj 6 conj VERB
     on 13 prep 17 case ADP
     either 17 preconj 17 cc:preconj CCONJ
     the 17 det 17 det DET
     U.S. 14 pobj 13 obl PROPN
     or 17 cc 22 cc CCONJ
     London 22 nn 22 compound PROPN
     stock 22 nn 22 compound NOUN
     trading 22 nn 22 compound NOUN
     tapes 17 conj 17 conj NOUN
     . 6 punct 6 punct PUNCT
     """),
    # wsj_0071.mrg:479
    ('( (S (NP-SBJ (NP (DT The) (JJ great) (NNS reds)) (PP (IN of) (NP (DT the) (NNP Rhone) (NNP Valley)))) '
     '(VP (VB have) (VP (VBN soared) (PP-LOC-CLR (IN in) (NP (NN price))) (ADVP (RB as) (RB well)))) (. .)))',
     """\
     The 3 det 3 det DET
     great 3 amod 3 amod ADJ
     reds 9 nsubj 9 nsubj NOUN
     of 3 prep 7 case ADP
     the 7 det 7 det DET
     Rhone 7 nn 7 compound PROPN
     Valley 4 pobj 3 nmod PROPN
     have 9 aux 9 aux AUX
     soared 0 root 0 root VERB
     in 9 prep 11 case ADP
     price 10 pobj 9 obl NOUN
     as 13 advmod 9 advmod ADV
     well 9 advmod 12 fixed ADV
     . 9 punct 9 punct PUNCT
     """),
    # wsj_0113.mrg:28
    ('( (S (NP-SBJ (DT The) (JJ previous) (NN record)) (VP (VBD was) (NP-PRD (QP ($ $) (CD 57.7) (CD '
     'billion)) (-NONE- *U*)) (PP-TMP (IN in) (NP (CD 1987))) (, ,) (PP (VBG according) (PP (TO to) (NP (DT '
     'the) (NNP Agriculture) (NNP Department))))) (. .)))',
     """\
     The 3 det 3 det DET
     previous 3 amod 3 amod ADJ
     record 5 nsubj 5 nsubj NOUN
     was 5 cop 5 cop AUX
     $ 0 root 0 root SYM
     57.7 7 number 7 compound NUM
     billion 5 num 5 nummod NUM
     in 5 prep 9 case ADP
     1987 8 pobj 5 obl NUM
     , 5 punct 5 punct PUNCT
     according 5 prep 15 case VERB
     to 11 pcomp 11 fixed ADP
     the 15 det 15 det DET
     Agriculture 15 nn 15 compound PROPN
     Department 12 pobj 5 obl PROPN
     . 5 punct 5 punct PUNCT
     """),
    # synthetic trees for rules the sample's fully matching sentences lack (QP coordination, up to,
    # not only / but also), converted by the same CoreNLP build
    ('(ROOT (S (NP (PRP They)) (VP (VBD paid) (NP (QP (RB about) (CD 5)) (QP (CC or) (CD 6)) (NNS dollars))) (. .)))',
     """\
     They 2 nsubj 2 nsubj PRON
     paid 0 root 0 root VERB
     about 4 advmod 4 advmod ADV
     5 7 num 7 nummod NUM
     or 4 cc 6 cc CCONJ
     6 4 conj 4 conj NUM
     dollars 2 dobj 2 obj NOUN
     . 2 punct 2 punct PUNCT
     """),
    ('(ROOT (S (NP (NNS Prices)) (VP (VBD rose) (PP (IN by) (NP (QP (RB up) (TO to) (CD 10)) (NN %)))) (. .)))',
     """\
     Prices 2 nsubj 2 nsubj NOUN
     rose 0 root 0 root VERB
     by 2 prep 7 case ADP
     up 6 quantmod 6 advmod ADV
     to 4 mwe 4 fixed ADP
     10 7 num 7 nummod NUM
     % 3 pobj 2 obl SYM
     . 2 punct 2 punct PUNCT
     """),
    ('(ROOT (S (CONJP (RB Not) (RB only)) (NP (PRP he)) (VP (VBD left) (, ,) (CONJP (CC but) (RB also)) '
     '(VP (VBD sang))) (. .)))',
     """\
     Not 2 neg 3 advmod PART
     only 4 dep 3 advmod ADV
     he 4 nsubj 4 nsubj PRON
     left 0 root 0 root VERB
     , 4 punct 4 punct PUNCT
     but 7 cc 8 cc CCONJ
     also 4 cc 8 advmod ADV
     sang 4 conj 4 conj VERB
     . 4 punct 4 punct PUNCT
     """),
]


def _unescape(form: str) -> str:
    """CoreNLP prints PTB's escaped slash and round brackets unescaped."""
    return {"-LRB-": "(", "-RRB-": ")"}.get(form, form).replace("\\/", "/")


@pytest.mark.parametrize(("bracketed", "expected"), GOLDEN, ids=[f"golden{i}" for i in range(len(GOLDEN))])
def test_golden_sentence_equals_corenlp(bracketed: str, expected: str) -> None:
    rows = [line.split() for line in expected.strip().splitlines()]
    tree = parse_tree(bracketed)
    sd, ud = convert(tree, "sd"), convert(tree, "ud")
    assert [_unescape(f) for f in sd.forms] == [r[0] for r in rows]
    assert [(str(h), d) for h, d in zip(sd.heads, sd.deprels)] == [(r[1], r[2]) for r in rows]
    assert [(str(h), d, u) for h, d, u in zip(ud.heads, ud.deprels, ud.upos)] == [(r[3], r[4], r[5]) for r in rows]


def test_reading_drops_empty_elements_and_keeps_tmp_and_adv_tags() -> None:
    tree = parse_tree("( (S (NP-SBJ-1 (NP-SBJ-1 (NNP Sam))) (VP (VBD died) (NP (-NONE- *T*-1)) "
                      "(NP-TMP=2 (NN today)) (NP-ADV (NN home))) (. .)))")
    root = read_tree(tree)
    assert repr(root) == "(ROOT (S (NP (NNP Sam)) (VP (VBD died) (NP-TMP (NN today)) (NP-ADV (NN home))) (. .)))"
    assert [leaf.index for leaf in root.leaves()] == [1, 2, 3, 4, 5]
    assert basic_category("-LRB-") == "-LRB-" and basic_category("PRT|ADVP") == "PRT"
    assert dependency_label("UCP-TMP-3") == "UCP-TMP" and dependency_label("PP-TMP") == "PP"


def test_forms_are_the_leaves_as_written() -> None:
    tree = parse_tree("(S (NP (CD 3\\/4)) (VP (VBD rose) (PRN (-LRB- -LRB-) (NP (NN x)) (-RRB- -RRB-))))")
    assert convert(tree, "ud").forms == ("3\\/4", "rose", "-LRB-", "x", "-RRB-")


def test_a_label_without_head_rule_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no head rule for constituent label 'FOO'"):
        convert(parse_tree("(S (FOO (NN a) (NN b)) (VP (VBZ c)))"), "sd")
    with pytest.raises(InputError, match="no overt terminals"):
        convert(parse_tree("(S (NP (-NONE- *)))"), "ud")
