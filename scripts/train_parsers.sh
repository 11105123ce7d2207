#!/usr/bin/env bash
# Train the biaffine parser on English-LinES, Turkish-IMST and Wolof-WTB (gold tokenisation), 1 thread, 15 minutes
# each (taggers included), then evaluate on test.
# Usage: scripts/train_parsers.sh OUT_DIR [gold|predicted]
#   predicted (default): UPOS from the parser's own tagger (2-fold jackknifed training tags, 1.5 min per tagger)
#   gold: gold UPOS in training and test
set -euo pipefail
out=${1:-runs/parsers}
tags=${2:-predicted}
mkdir -p "$out"
for tb in UD_English-LinES:en_lines UD_Turkish-IMST:tr_imst UD_Wolof-WTB:wo_wtb; do
  dir=${tb%%:*}; code=${tb##*:}
  [ -d "$out/$code" ] || forgetbench parse train --train "data/ud/$dir/$code-ud-train.conllu" \
      --dev "data/ud/$dir/$code-ud-dev.conllu" --out "$out/$code" --minutes 15 --threads 1 --quiet \
      --tags "$tags" --tagger-minutes 1.5 --jackknife 2
  forgetbench parse eval "$out/$code" "data/ud/$dir/$code-ud-test.conllu" --threads 1 | tee "$out/$code.test.json"
done
