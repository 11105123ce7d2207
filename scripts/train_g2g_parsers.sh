#!/usr/bin/env bash
# The graph-to-graph parser study's models, 1 thread each, on English-LinES, Turkish-IMST and Wolof-WTB:
#   biaffine  10.5 min (taggers 3 x 1.5 min: 2-fold jackknife + final; the parser ~6 min)
#   SynTr     6 min, the biaffine parser's tagger and training tags (--tagger-from)
#   RNGTr     6 min, warm-started from that SynTr, initial parser = the biaffine one, 2 iterations per batch
#   RNGTr     the same without the relation LayerNorm (the ablation)
#   RNGTr     6 min after 2 fold biaffine parsers of 6 min each: trained on their held-out predictions (k-fold)
#   G2GTr     10 min, Wolof-WTB only
# then: python scripts/parser_study.py OUT_DIR --out OUT_DIR/study.json
# Usage: scripts/train_g2g_parsers.sh OUT_DIR   (models already there are kept; run two in parallel on 2 cores)
set -euo pipefail
out=${1:-runs/g2g}
mkdir -p "$out"
for tb in UD_Wolof-WTB:wo_wtb UD_English-LinES:en_lines UD_Turkish-IMST:tr_imst; do
  dir=${tb%%:*}; code=${tb##*:}
  tr=data/ud/$dir/$code-ud-train.conllu; dv=data/ud/$dir/$code-ud-dev.conllu
  [ -d "$out/$code-biaffine" ] || forgetbench parse train --train "$tr" --dev "$dv" --out "$out/$code-biaffine" \
      --minutes 10.5 --threads 1 --quiet --tags predicted --tagger-minutes 1.5 --jackknife 2
  common=(--train "$tr" --dev "$dv" --tags predicted --tagger-from "$out/$code-biaffine" --threads 1 --quiet)
  [ -d "$out/$code-syntr" ] || forgetbench parse train --arch syntr "${common[@]}" --minutes 6 --out "$out/$code-syntr"
  for ln in on off; do
    name=$code-rngtr; flag=()
    [ $ln = off ] && { name=$code-rngtr-noln; flag=(--no-relation-norm); }
    [ -d "$out/$name" ] || forgetbench parse train --arch rngtr "${common[@]}" --minutes 6 --initial "$out/$code-biaffine" \
        --warm-start "$out/$code-syntr" --train-iterations 2 --refiner-graphs empty "${flag[@]}" --out "$out/$name"
  done
  [ -d "$out/$code-rngtr-kfold" ] || forgetbench parse train --arch rngtr "${common[@]}" --minutes 6 \
      --initial "$out/$code-biaffine" --warm-start "$out/$code-syntr" --train-iterations 2 \
      --refiner-graphs kfold --folds 2 --fold-minutes 6 --out "$out/$code-rngtr-kfold"
  if [ $code = wo_wtb ] && [ ! -d "$out/$code-g2gtr" ]; then
    forgetbench parse train --arch g2gtr "${common[@]}" --minutes 10 --out "$out/$code-g2gtr"
  fi
done
