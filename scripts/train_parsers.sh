#!/usr/bin/env bash
# Train the biaffine parser on English-LinES, Turkish-IMST and Wolof-WTB (gold tokenisation), 1 thread, each to
# convergence by steps (Dozat's rule, parse train's default: at most 30,000 steps, stop after 5,000 without a dev
# improvement), then evaluate on test.
# Usage: scripts/train_parsers.sh OUT_DIR [gold|predicted]
#   predicted (default): UPOS from the parser's own tagger (2-fold jackknifed training tags; taggers by the same rule)
#   gold: gold UPOS in training and test
set -euo pipefail
out=${1:-runs/parsers}
tags=${2:-predicted}
mkdir -p "$out"
for tb in UD_English-LinES:en_lines UD_Turkish-IMST:tr_imst UD_Wolof-WTB:wo_wtb; do
  dir=${tb%%:*}; code=${tb##*:}
  [ -d "$out/$code" ] || forgetbench parse train --train "data/ud/$dir/$code-ud-train.conllu" \
      --dev "data/ud/$dir/$code-ud-dev.conllu" --out "$out/$code" --threads 1 --quiet \
      --tags "$tags" --jackknife 2
  forgetbench parse eval "$out/$code" "data/ud/$dir/$code-ud-test.conllu" --threads 1 | tee "$out/$code.test.json"
done
