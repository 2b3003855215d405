#!/usr/bin/env bash
# Several GPUs of one host (README: "Parallel runs", "Fuzz campaigns"): `pytest --tdiff` over the bundled
# suites at -n 1, GPUs and 2 x GPUs (the same seed: the same cases), then fuzz campaigns of a fixed length,
# one process and then one process per GPU, against one Redis server's example database. nvidia-smi is
# sampled every 2 s (which processes sit on which GPU). Logs and a one-line result per step under $OUT.
# Needs: .whl-fuzz/ (HypoFuzz and its dependencies as wheels, installed with --target), .gpu-redis/ (a
# redis-server binary and the libraries it lacks there). Usage: [STEPS='pytest fuzz'] [GPUS=N] bash bench/gpu/multi_gpu.sh
# [SECONDS per campaign]
set -uo pipefail
OUT=${OUT:-/tmp/multi-gpu-out}
FUZZ_S=${1:-60}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PY:-python3}
unset CI  # a fuzz target runs only outside the derandomized ci profile
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }

if [ -d .whl-fuzz ] && ! $PY -c "import hypofuzz" 2>/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/fuzz-site .whl-fuzz/*.whl \
        2>&1 | tail -2
    export PYTHONPATH=/tmp/fuzz-site:$PYTHONPATH
    export PATH=/tmp/fuzz-site/bin:$PATH
fi
# tdiff's pytest plugin: by its entry point where tdiff is installed, else named
PLUGIN="-p tdiff.plugin"
$PY -c "import importlib.metadata as m; m.version('tdiff')" 2>/dev/null && PLUGIN=""
GPUS=${GPUS:-$($PY -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)}
$PY -c "import torch, triton, hypothesis; print('torch', torch.__version__, 'triton', triton.__version__, \
'hypothesis', hypothesis.__version__, 'gpus', torch.cuda.device_count(), \
[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])" | tee "$OUT/versions.txt"
nproc >> "$OUT/versions.txt"

sample_gpus() {  # which compute processes sit on which GPU, every 2 s, until killed
    while true; do
        echo "t=$(date +%s) $(nvidia-smi --query-compute-apps=gpu_bus_id,pid --format=csv,noheader 2>/dev/null \
            | tr '\n' ';')"
        sleep 2
    done
}
per_gpu() {  # the most processes seen at once on each GPU in a sampling log
    $PY - "$1" <<'EOF'
import sys, collections
most = collections.Counter()
for line in open(sys.argv[1]):
    now = collections.Counter(item.split(",")[0].strip() for item in line.split(" ", 1)[1].split(";") if "," in item)
    for bus, n in now.items():
        most[bus] = max(most[bus], n)
print(" ".join(f"{bus}: {n}" for bus, n in sorted(most.items())) or "none seen")
EOF
}

# -- pytest --tdiff over the bundled suites at several worker counts -----------------------------------------
BUNDLED=$(ls suites/*.py | grep -v __init__)
STEPS=${STEPS:-pytest fuzz}
[[ " $STEPS " == *" pytest "* ]] && for n in 1 "$GPUS" $((2 * GPUS)); do
    [ "$n" -ge 1 ] || continue
    rm -rf .tdiff
    sample_gpus > "$OUT/smi-n$n.txt" &
    SMI=$!
    t0=$SECONDS
    # shellcheck disable=SC2086
    $PY -m pytest $PLUGIN --tdiff $BUNDLED -n "$n" -p no:cacheprovider --tdiff-seed 7 -q > "$OUT/pytest-n$n.txt" 2>&1
    rc=$?
    kill $SMI
    summary "pytest -n $n: exit $rc, $((SECONDS - t0)) s; $(grep -m1 '^tdiff: [0-9]* checks' "$OUT/pytest-n$n.txt" \
        | cut -c1-90); processes per GPU at most: $(per_gpu "$OUT/smi-n$n.txt")"
done

# -- fuzz campaigns: one process, then one per GPU, one shared Redis database -------------------------------
REDIS=""
if [ -x .gpu-redis/redis-server ]; then
    LD_LIBRARY_PATH=$PWD/.gpu-redis .gpu-redis/redis-server --port 6399 --bind 127.0.0.1 --save "" --appendonly no \
        --daemonize yes --dir /tmp > "$OUT/redis.txt" 2>&1 && sleep 1 && REDIS=redis://127.0.0.1:6399/0
fi
DB=${REDIS:-/tmp/tdiff-fuzz-db}
summary "example database: $DB"
TARGETS="$BUNDLED bench/power/mutants.py"
[[ " $STEPS " == *" fuzz "* ]] && for n in 1 "$GPUS"; do
    [ "$n" -ge 1 ] || continue
    [ -n "$REDIS" ] && $PY -c "import redis; redis.Redis.from_url('$REDIS').flushall()"
    rm -rf "/tmp/camp-n$n" "/tmp/run-n$n"
    sample_gpus > "$OUT/smi-fuzz-n$n.txt" &
    SMI=$!
    # shellcheck disable=SC2086
    timeout -s INT "$FUZZ_S" hypothesis fuzz -n "$n" --no-dashboard -- $PLUGIN --tdiff --tdiff-fuzz-targets \
        --tdiff-campaign "/tmp/camp-n$n" --tdiff-run-dir "/tmp/run-n$n" --tdiff-database "$DB" \
        -o "tdiff_paths=suites bench/power/mutants.py" $TARGETS > "$OUT/fuzz-n$n.txt" 2>&1
    sleep 3  # the processes' last snapshots
    kill $SMI
    $PY -m bench.speed.campaign_rates "/tmp/camp-n$n" --json "$OUT/rates-n$n.json" > "$OUT/rates-n$n.txt" 2>&1
    summary "fuzz -n $n, ${FUZZ_S} s: $(tail -1 "$OUT/rates-n$n.txt"); processes per GPU at most: \
$(per_gpu "$OUT/smi-fuzz-n$n.txt")"
    cat "$OUT/rates-n$n.txt" >> "$OUT/summary.txt"
done
# the corpora of both campaigns' processes, merged into one
rm -rf /tmp/merged
for n in 1 "$GPUS"; do
    [ -d "/tmp/run-n$n/corpus" ] || continue
    $PY -m tdiff.cli corpus merge "/tmp/run-n$n/corpus" --into /tmp/merged > "$OUT/merge-n$n.txt" 2>&1
    summary "merge of fuzz -n $n's corpus: exit $?; $(tail -1 "$OUT/merge-n$n.txt")"
done
$PY -m tdiff.cli campaign "/tmp/camp-n$GPUS" > "$OUT/campaign-n$GPUS.txt" 2>&1
[ -n "$REDIS" ] && $PY -c "import redis; redis.Redis.from_url('$REDIS').shutdown(nosave=True)" 2>/dev/null
true
