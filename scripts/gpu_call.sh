#!/usr/bin/env bash
# A lent GPU's one prepared call: the GPU check, then the queue, their reports in at most 8 files.
#
#   bash scripts/gpu_call.sh prepare        # here: weights the call does not need moved out, wheels fetched,
#                                           # the queue's shared data packed
#   (the call)   command: bash scripts/gpu_call.sh device [CHECK_S] [QUEUE_S] [--only STEPS]
#                carry:   ["build/gpu-wheels"] or ["build/gpu-data"]     timeout_s: CHECK_S + QUEUE_S + 90
#   bash scripts/gpu_call.sh restore        # here: the weights back, the checkout as it was
#
# The eight steps take about 600 s on an H200 (2026-11-28: tests 86, sweep 106, compress 53, distill 57, parse 82 s;
# shape-418m and device-map past 104 and 60 s), more than one call may run: two calls back to back (the machine
# stays warm 30 s; a lent machine gives 900 s of device time, start-up included):
#   1. device 400 0 --only tests,sweep,compress,shape-418m         carry build/gpu-wheels   timeout_s 460
#   2. device 280 QUEUE_S --only device-map,distill,parse,probes    carry build/gpu-data     timeout_s 280 + QUEUE_S + 60
# Where the check has passed on that kind of GPU and nothing it covers has changed, one call gives the queue the
# time: device 0 QUEUE_S (CHECK_S 0: no check), carry build/gpu-data, timeout_s QUEUE_S + 90.
#
# prepare: the checkout a call copies must stay under 64 MiB with what it carries; the students' and encoders'
# weights (39 MB) are moved to ~/.cache/forgetbench/gpu-stash and the wheels of what the GPU image lacks
# (scripts/gpu_check.py PACK_WHEELS, Python 3.12) go to build/gpu-wheels (ignored by git). The shared data the
# queue's runs read (../shared does not travel) is packed to build/gpu-data (scripts/pack_shared.py: WMT news and
# Tatoeba, evaluation lines emptied, ≈ 12 MB) with the wheels but pycld2 (10 MB; the language identifier of the
# languages lid.176 lacks, which only the first call's tests may reach): the two do not fit one call together.
# It prints what each call copies and carries.
# device: installs the wheels, runs `gpu_check.py --budget-s CHECK_S` (default 360) and `gpu_queue.py --budget-s
# QUEUE_S` (default 90; 0: no queue) and leaves in $OUT: env.txt (GPU, driver, Python, torch), gpu_check.json and
# .md, step_logs.txt (every step's time-stamped log), gpu_queue.json and the queue's archives that fit (the queue
# bounds them itself). GPU_CALL_DEVICE=cpu runs the same on the CPU as a dry run (the plumbing, anywhere).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
stash=${GPU_CALL_STASH:-$HOME/.cache/forgetbench/gpu-stash}
moved=(artifacts/student-kd artifacts/student-nokd artifacts/encoders)

case "${1:-}" in
prepare)
    cd "$here" || exit 2
    if [ -n "$(git status --porcelain)" ]; then
        echo "gpu_call: the checkout has changes; commit or stash them first (restore checks it comes back clean)" >&2
        exit 2
    fi
    mkdir -p "$stash"
    for p in "${moved[@]}"; do
        if [ -e "$stash/$(basename "$p")" ]; then
            echo "gpu_call: $stash/$(basename "$p") exists (an earlier prepare not restored?); restore first" >&2
            exit 2
        fi
    done
    for p in "${moved[@]}"; do [ -e "$p" ] && mv "$p" "$stash/"; done
    rm -rf build/gpu-wheels /tmp/gpu-call-pack
    python scripts/gpu_check.py --pack /tmp/gpu-call-pack >/dev/null || { echo "gpu_call: fetching wheels failed" >&2; exit 2; }
    mkdir -p build && mv /tmp/gpu-call-pack/wheels build/gpu-wheels && rm -rf /tmp/gpu-call-pack
    rm -rf build/gpu-data
    python scripts/pack_shared.py --out build/gpu-data/shared-data.tar.xz \
        || echo "gpu_call: no shared data packed: the queue's runs will train on the shipped samples" >&2
    mkdir -p build/gpu-data && find build/gpu-wheels -name '*.whl' ! -name 'pycld2-*' -exec cp {} build/gpu-data/ \;
    # the GraphMerge runs' graphs, where the study has built them here (0.7 h each on one CPU thread): the queue's
    # runs of those names start from them (scripts/gpu_queue.py --carried)
    study=${GPU_CALL_STUDY:-$HOME/.cache/forgetbench/graphmerge-study}
    for g in "$study"/graphmerge-s*/graph.npz; do
        [ -f "$g" ] || continue
        r=build/gpu-data/runs/$(basename "$(dirname "$g")")
        mkdir -p "$r" && cp "$(dirname "$g")"/{train-run.json,graph.npz,graph.json} "$r"/ && echo "gpu_call: carries $g"
    done
    tree=$( (git ls-files; git ls-files -o --exclude-standard) | while read -r f; do [ -f "$f" ] && echo "$f"; done \
            | xargs -d '\n' du -cb 2>/dev/null | tail -1 | cut -f1)
    for c in gpu-wheels gpu-data; do
        n=$(du -sb "build/$c" | cut -f1)
        echo "gpu_call: a call carrying build/$c copies $((tree / 1048576)) MiB and carries $((n / 1048576)) MiB: $(((tree + n) / 1048576)) MiB of 64 at most"
    done
    echo "gpu_call: run: command 'bash scripts/gpu_call.sh device 400 0 --only tests,sweep,compress,shape-418m', carry [\"build/gpu-wheels\"], timeout_s 460;"
    echo "gpu_call: then at once: 'bash scripts/gpu_call.sh device 280 QUEUE_S --only device-map,distill,parse,probes', carry [\"build/gpu-data\"], timeout_s 340 + QUEUE_S (0 where no device time is left)"
    ;;
restore)
    cd "$here" || exit 2
    for p in "${moved[@]}"; do
        b=$(basename "$p")
        if [ -e "$stash/$b" ]; then
            [ -e "$p" ] && { echo "gpu_call: $p exists here and in $stash; left both" >&2; exit 2; }
            mv "$stash/$b" "$p"
        fi
    done
    git status --porcelain | grep -q . && { echo "gpu_call: the checkout is not clean after restore:" >&2; git status --short >&2; exit 1; }
    echo "gpu_call: restored; the checkout is clean"
    ;;
device)
    cd "$here" || exit 2
    check_s=${2:-360}
    queue_s=${3:-90}
    shift $(( $# < 3 ? $# : 3 ))
    out=${OUT:?gpu_call device: \$OUT is where the call returns files}
    dev=${GPU_CALL_DEVICE:-cuda}
    dry=()
    [ "$dev" = cpu ] && dry=(--dry-run)
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true; python -V
      python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"
      lscpu | grep -m1 'Model name'; nproc; uptime; } > "$out/env.txt" 2>&1
    wheels=$(ls build/gpu-wheels/*.whl build/gpu-data/*.whl 2>/dev/null)
    if [ -n "$wheels" ]; then  # the carried folder's (both: the same wheels, once each)
        echo "$wheels" | xargs -n1 basename | sort -u | while read -r w; do ls build/gpu-*/"$w" | head -1; done \
            | xargs pip install -q --no-index --no-deps --target /tmp/gpu-call-site >> "$out/env.txt" 2>&1
        export PYTHONPATH=/tmp/gpu-call-site:$here${PYTHONPATH:+:$PYTHONPATH}
    fi
    pack=${GPU_CALL_DATA:-build/gpu-data/shared-data.tar.xz}
    shared=${GPU_CALL_SHARED:-$here/../shared}
    if [ -f "$pack" ] && [ ! -e "$shared/data" ]; then  # where the configs look for the shared data folder
        { mkdir -p "$shared" && tar -xJf "$pack" -C "$shared" && echo "shared data: $pack unpacked to $shared/data"; } \
            >> "$out/env.txt" 2>&1 || echo "shared data: $pack could not be unpacked to $shared" >> "$out/env.txt"
    fi
    work=$(mktemp -d)
    if [ "$check_s" != 0 ]; then
        timeout $((check_s + 20)) python scripts/gpu_check.py --out "$work/check" --budget-s "$check_s" --device "$dev" "${dry[@]}" "$@"
        echo "gpu_call: check exit $?"
        cp "$work"/check/gpu_check.json "$work"/check/gpu_check.md "$out"/ 2>/dev/null
        for f in "$work"/check/work-*/*.log; do [ -f "$f" ] && { echo "=== $(basename "$f")"; tail -c 20000 "$f"; }; done > "$out/step_logs.txt"
    fi
    if [ "$queue_s" != 0 ]; then
        qdev=()
        [ "$dev" = cpu ] && qdev=(--device cpu)
        # 8 files come back: env, the check's two, the step logs (none without a check), the queue's report and
        # 3 archives or parts (6 without a check)
        timeout $((queue_s + 30)) python scripts/gpu_queue.py --out "$work/queue" --budget-s "$queue_s" \
            --return-files $(( check_s == 0 ? 6 : 3 )) \
            "${qdev[@]}"
        echo "gpu_call: queue exit $?"
        [ -d "$work/queue" ] && cp "$work"/queue/* "$out"/ 2>/dev/null
    fi
    ls -la "$out"
    ;;
*)
    sed -n '2,21p' "$0"
    exit 2
    ;;
esac
