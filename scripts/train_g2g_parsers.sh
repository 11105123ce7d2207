#!/usr/bin/env bash
# The graph-to-graph parser study's models, 1 thread each, on English-LinES, Turkish-IMST and Wolof-WTB, each
# trained by steps (parse train's default, Dozat's rule: at most 30,000 steps, stop after 5,000 without a dev
# improvement; taggers and k-fold parsers by the same rule):
#   biaffine  its taggers: 2-fold jackknife + final
#   SynTr     the biaffine parser's tagger and training tags (--tagger-from)
#   RNGTr     warm-started from that SynTr, initial parser = the biaffine one, T = 3 iterations in training and test (the thesis)
#   RNGTr     the same without the relation LayerNorm (the ablation)
#   RNGTr     after 2 fold biaffine parsers: trained on their held-out predictions (k-fold)
#   G2GTr     Wolof-WTB only
# then: python scripts/parser_study.py OUT_DIR --out OUT_DIR/study.json
# Usage: scripts/train_g2g_parsers.sh OUT_DIR   (models already there are kept; run two in parallel on 2 cores)
set -euo pipefail
out=${1:-runs/g2g}
mkdir -p "$out"
for tb in UD_Wolof-WTB:wo_wtb UD_English-LinES:en_lines UD_Turkish-IMST:tr_imst; do
  dir=${tb%%:*}; code=${tb##*:}
  tr=data/ud/$dir/$code-ud-train.conllu; dv=data/ud/$dir/$code-ud-dev.conllu
  [ -d "$out/$code-biaffine" ] || forgetbench parse train --train "$tr" --dev "$dv" --out "$out/$code-biaffine" \
      --threads 1 --quiet --tags predicted --jackknife 2
  common=(--train "$tr" --dev "$dv" --tags predicted --tagger-from "$out/$code-biaffine" --threads 1 --quiet)
  [ -d "$out/$code-syntr" ] || forgetbench parse train --arch syntr "${common[@]}" --out "$out/$code-syntr"
  for ln in on off; do
    name=$code-rngtr; flag=()
    [ $ln = off ] && { name=$code-rngtr-noln; flag=(--no-relation-norm); }
    [ -d "$out/$name" ] || forgetbench parse train --arch rngtr "${common[@]}" --initial "$out/$code-biaffine" \
        --warm-start "$out/$code-syntr" --refiner-graphs empty "${flag[@]}" --out "$out/$name"
  done
  [ -d "$out/$code-rngtr-kfold" ] || forgetbench parse train --arch rngtr "${common[@]}" \
      --initial "$out/$code-biaffine" --warm-start "$out/$code-syntr" \
      --refiner-graphs kfold --folds 2 --out "$out/$code-rngtr-kfold"
  if [ $code = wo_wtb ] && [ ! -d "$out/$code-g2gtr" ]; then
    forgetbench parse train --arch g2gtr "${common[@]}" --out "$out/$code-g2gtr"
  fi
done
