#!/usr/bin/env bash
# Train the biaffine parser on the three shipped treebanks (gold tokenisation, gold UPOS), 1 thread,
# 14 minutes each, then evaluate on test. Usage: scripts/train_parsers.sh OUT_DIR
set -euo pipefail
out=${1:-runs/parsers}
mkdir -p "$out"
for tb in UD_English-LinES:en_lines UD_Turkish-IMST:tr_imst UD_Wolof-WTB:wo_wtb; do
  dir=${tb%%:*}; code=${tb##*:}
  [ -d "$out/$code" ] || forgetbench parse train --train "data/ud/$dir/$code-ud-train.conllu" \
      --dev "data/ud/$dir/$code-ud-dev.conllu" --out "$out/$code" --minutes 14 --threads 1 --quiet
  forgetbench parse eval "$out/$code" "data/ud/$dir/$code-ud-test.conllu" --threads 1 | tee "$out/$code.test.json"
done
