#!/usr/bin/env bash
# One batched session on the GPU machine (the `device` tool): everything that needs the compiled path, each step's
# log under $OUT, a one-line result per step in $OUT/summary.txt. Wheels it needs (no network there) are carried in
# .whl/ (pip download --no-deps liger-kernel==0.8.5 flag-gems==5.0.2 packaging pyyaml sqlalchemy greenlet
# typing_extensions). Usage: bash bench/gpu/gpu_session.sh [step ...] (default: all steps).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=python
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
since() { python3 -c "import time; print(round(time.time() - $1, 2))"; }

setup() {
    local tag
    tag=$($PY -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    $PY -m pip install -q --no-deps --no-index .whl/*none-any.whl $(ls .whl/*"$tag"*.whl 2>/dev/null) 2>&1 | tail -2
    $PY -c "import torch, triton, numpy, hypothesis; print('torch', torch.__version__, 'triton', triton.__version__, \
'numpy', numpy.__version__, 'hypothesis', hypothesis.__version__, torch.cuda.get_device_name())" | tee "$OUT/versions.txt"
    nproc >> "$OUT/versions.txt"
}

step_main() {  # the README's main job, as a user runs it on a GPU machine
    local t0=$SECONDS
    rm -rf .tdiff .hypothesis
    $PY -m pytest -p tdiff.plugin --tdiff suites -n 8 -p no:cacheprovider > "$OUT/main.txt" 2>&1
    summary "main job: exit $?, $((SECONDS - t0)) s, $(wc -l < "$OUT/main.txt") lines; $(tail -1 "$OUT/main.txt")"
}

step_profile() {  # the main job on a fresh Triton cache, then where its compile time went (bench/speed/compile_cache_profile.py)
    local t0=$SECONDS cache=/tmp/tdiff-fresh-cache
    rm -rf .tdiff .hypothesis "$cache"
    TRITON_CACHE_DIR=$cache $PY -m pytest -p tdiff.plugin --tdiff suites -n 8 -p no:cacheprovider \
        --tdiff-json "$OUT/main.json" > "$OUT/main.txt" 2>&1
    summary "main job (fresh cache): exit $?, $((SECONDS - t0)) s, $(wc -l < "$OUT/main.txt") lines; $(tail -1 "$OUT/main.txt")"
    $PY -m bench.speed.compile_cache_profile "$cache" --json "$OUT/main.json" > "$OUT/compile_profile.md" 2>&1
    summary "compile profile: $(grep -m2 '^- ' "$OUT/compile_profile.md" | tr '\n' ' ')"
}

step_seeds() {  # the real suites at two more seeds
    for seed in ${SEEDS:-1 2}; do
        local t0=$SECONDS
        rm -rf .tdiff
        $PY -m pytest -p tdiff.plugin --tdiff suites/liger suites/flaggems -n 8 -p no:cacheprovider --tdiff-seed $seed -q \
            > "$OUT/seed$seed.txt" 2>&1
        summary "real suites seed $seed: exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/seed$seed.txt")"
    done
}

step_gpu_tests() {  # tdiff's own tests that need the compiled backend
    local t0=$SECONDS
    $PY -m pytest tests -m gpu -n 8 -q -p no:cacheprovider > "$OUT/gpu_tests.txt" 2>&1
    summary "tests -m gpu: exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/gpu_tests.txt")"
}

step_localize() {  # --tdiff-localize end to end: a pass planted in make_ttgir, named in the pytest report
    local t0=$SECONDS
    rm -rf .tdiff
    TDIFF_STAGES_PLANT=ttgir:ttgpuir.add_remove_layout_conversions:0 $PY -m pytest -p tdiff.plugin --tdiff tests/stage_kernels.py \
        -k add_kernel --tdiff-localize on -p no:cacheprovider -p no:xdist > "$OUT/localize.txt" 2>&1
    summary "localize (pytest): exit $?, $((SECONDS - t0)) s; $(grep -m1 -o 'which pass: .*' "$OUT/localize.txt" | cut -c1-200)"
}

step_stages() {  # stage lanes on the bundled suites, planted passes localized
    local t0=$SECONDS
    $PY -m bench.gpu.stages_gpu > "$OUT/stages.txt" 2>&1
    summary "bench/gpu/stages_gpu.py: exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/stages.txt")"
}

step_findings() {  # the snippets of this round's new findings, on the compiled kernels
    $PY -m bench.gpu.findings_gpu > "$OUT/findings.txt" 2>&1
    summary "findings snippets: exit $?; $(tr '\n' ' ' < "$OUT/findings.txt" | cut -c1-400)"
}

step_power6() {  # the power benchmark's six blind-spot mutants and their originals, compiled path on every case
    local t0=$SECONDS
    $PY -m bench.power.power --only lse_masked_row_nan,lse_inf_max_nan,fp16_axpy_via_bf16,fp16_grad_via_bf16,\
rope_decode_row_stride,row_scale_unit_stride,power_mutants --out "$OUT/power6.md" > "$OUT/power6.txt" 2>&1
    summary "power, six blind-spot mutants: exit $?, $((SECONDS - t0)) s; $(grep -m1 'found in at least' "$OUT/power6.md")"
}

step_bench() {  # the batched interpreter: bench/speed/per_case.py's table (Triton's interpreter, tdiff in batches, one by one)
    local t0=$SECONDS
    $PY -m bench.speed.per_case --quick ${BENCH_ARGS:-} > "$OUT/bench.txt" 2>&1
    summary "bench/speed/per_case.py --quick: exit $?, $((SECONDS - t0)) s"
}

step_real() {  # the real suites' wall and interpreter time, programs one by one (before batches) and in batches
    for how in ${HOWS:-sequential batched}; do
        local t0=$SECONDS backends=compiled,interpreter
        rm -rf .tdiff
        [ "$how" = sequential ] && backends=compiled,interpreter:sequential
        $PY -m pytest -p tdiff.plugin --tdiff suites/liger suites/flaggems -n 8 -p no:cacheprovider -q \
            --tdiff-backends $backends --tdiff-json "$OUT/real_$how.json" > "$OUT/real_$how.txt" 2>&1
        summary "real suites, interpreter $how: exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/real_$how.txt"); \
$($PY -m bench.speed.backend_seconds "$OUT/real_$how.json")"
    done
}

plan_figures() {  # checks whose specialization classes no case compiled, and the boundary plan, from a --tdiff-json
    $PY - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
checks = d.get("checks") or d.get("results") or []
spec = [c for c in checks if c.get("spec_classes")]
planned = [c for c in checks if (c.get("plan") or {}).get("rows")]
t = d["totals"]
print(f"{len(checks)} checks, {t['cases']} cases; {len(spec)} with specialization classes no case compiled; "
      f"{len(planned)} with a boundary plan ({sum(c['plan']['rows'] for c in planned)} planned cases); "
      f"{t['compiles']} compiles, {t['compile_seconds']:.0f} s; backends {t['seconds']}")
PY
}

fresh_cache() {  # FRESH=1: each main job compiles into an empty Triton cache (as a fresh machine does), so that a
    # second job in one session does not load what the first compiled
    if [ "${FRESH:-0}" = 1 ]; then export TRITON_CACHE_DIR; TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-cache-XXXX); fi
}

step_main_before() {  # the main job with an earlier commit's code (.before/: git archive of that commit)
    local t0=$SECONDS
    fresh_cache
    (cd .before && rm -rf .tdiff .hypothesis && PYTHONPATH=$PWD $PY -m pytest -p tdiff.plugin --tdiff suites -n 8 \
        -p no:cacheprovider --tdiff-json "$OUT/main_before.json" > "$OUT/main_before.txt" 2>&1)
    summary "main job BEFORE: exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/main_before.txt"); \
$(plan_figures "$OUT/main_before.json")"
}

step_main_plan() {  # the main job with this checkout's code (the other half of main_before: run both in one session)
    local t0=$SECONDS
    fresh_cache
    rm -rf .tdiff .hypothesis
    $PY -m pytest -p tdiff.plugin --tdiff suites -n 8 -p no:cacheprovider --tdiff-json "$OUT/main_plan.json" \
        > "$OUT/main_plan.txt" 2>&1
    summary "main job NOW: exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/main_plan.txt"); $(plan_figures "$OUT/main_plan.json")"
}

step_real_seeds() {  # the real suites at SEEDS, with the code of WHICH (before: .before/, plan: this checkout)
    # (the dev profile, random draws: a seed draws other cases than CI's derandomized profile)
    for which in ${WHICH:-plan}; do
        for seed in ${SEEDS:-1 2}; do
            local t0=$SECONDS dir=.
            [ "$which" = before ] && dir=.before
            (cd $dir && rm -rf .tdiff && PYTHONPATH=$PWD $PY -m pytest -p tdiff.plugin --tdiff suites/liger suites/flaggems \
                -n 8 -p no:cacheprovider --tdiff-seed $seed -q --tdiff-json "$OUT/real_${which}_$seed.json" \
                > "$OUT/real_${which}_$seed.txt" 2>&1)
            summary "real suites $which seed $seed: exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/real_${which}_$seed.txt")"
        done
    done
}

step_cpu_seeds() {  # the real suites at CPU_SEEDS as a machine without a GPU runs them (CUDA hidden: interpreter vs
    # reference), on this machine's cores, in their own run directory; beside the GPU steps (`&`) when only verdicts matter
    for seed in ${CPU_SEEDS:-1 2 3}; do
        local t0=$SECONDS
        rm -rf .tdiff-cpu
        CUDA_VISIBLE_DEVICES= $PY -m pytest -p tdiff.plugin --tdiff suites/liger suites/flaggems -n ${CPU_N:-6} \
            -p no:cacheprovider --tdiff-seed $seed -q --tdiff-run-dir .tdiff-cpu > "$OUT/cpu_seed$seed.txt" 2>&1
        summary "real suites on CPU (CUDA hidden) seed $seed: exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/cpu_seed$seed.txt")"
    done
}

step_power_generic() {  # the planted bugs declared generically, with and without the plan, compiled path on every case
    local t0=$SECONDS only=rope_bhsd,tile_even,copy_mis,bias_exp,colsum_trans
    $PY -m bench.power.power --no-originals --only $only --seeds ${POWER_SEEDS:-10} --plan 0 --out "$OUT/power_generic_before.md" \
        > "$OUT/power_generic_before.txt" 2>&1
    summary "power generic, plan 0: exit $?, $((SECONDS - t0)) s; $(grep -m1 'found in at least' "$OUT/power_generic_before.md")"
    t0=$SECONDS
    $PY -m bench.power.power --no-originals --only $only --seeds ${POWER_SEEDS:-10} --out "$OUT/power_generic_plan.md" \
        > "$OUT/power_generic_plan.txt" 2>&1
    summary "power generic, plan: exit $?, $((SECONDS - t0)) s; $(grep -m1 'found in at least' "$OUT/power_generic_plan.md")"
}

step_probes() {  # bench/gpu/gpu_probes.py (the DyT flush and the cross-entropy smoothing cancellation), and the
    # one_class_smoothing check on the compiled kernel, its corpus entry kept
    $PY -m bench.gpu.gpu_probes > "$OUT/probes.txt" 2>&1
    summary "gpu probes: exit $?; $(tail -1 "$OUT/probes.txt")"
    rm -rf .tdiff
    $PY -m pytest -p tdiff.plugin --tdiff suites/liger/cross_entropy.py -k one_class_smoothing -p no:cacheprovider \
        -p no:xdist -rxX > "$OUT/one_class.txt" 2>&1
    summary "one_class_smoothing: exit $?; $(tail -1 "$OUT/one_class.txt")"
    mkdir -p "$OUT/corpus" && cp -r .tdiff/corpus/* "$OUT/corpus/" 2>/dev/null
}

step_reduce() {  # kernel reduction on the corpus with the compiled backend (bench/reduce/reduce.py): the compiled-path
    # findings first (REDUCE_FIRST), then every entry until REDUCE_TIMEOUT; reduced kernels in $OUT/reduced.tar.gz
    local t0=$SECONDS dir=/tmp/reduced
    rm -rf "$dir" && mkdir -p "$dir"
    $PY -m bench.reduce.reduce --no-mutants --budget ${REDUCE_BUDGET:-30} --only ${REDUCE_FIRST:-backward_h1_none_fp16 one_class} \
        --save "$dir/first" --json "$OUT/reduce_first.json" --out "$OUT/reduce_first.md" > "$OUT/reduce_first.txt" 2>&1
    summary "reduce (compiled-path entries): exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/reduce_first.md")"
    t0=$SECONDS
    timeout ${REDUCE_TIMEOUT:-400} $PY -m bench.reduce.reduce --no-mutants --budget ${REDUCE_BUDGET:-30} --save "$dir/all" \
        ${REDUCE_REST:+--only $REDUCE_REST} \
        --json "$OUT/reduce_all.json" --out "$OUT/reduce_all.md" > "$OUT/reduce_all.txt" 2>&1
    summary "reduce (corpus): exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/reduce_all.md" 2>/dev/null)"
    tar -czf "$OUT/reduced.tar.gz" -C "$dir" .
}

step_where() {  # the main job on a fresh Triton cache (as a fresh machine runs it), with CPU use logged, and where
    # its time went (bench/speed/wall_profile.py); TAG names the files, DIR runs another checkout's code (e.g. .before)
    local t0=$SECONDS tag=${TAG:-now} dir=${DIR:-.} vm
    export TRITON_CACHE_DIR; TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-cache-XXXX)
    vmstat 1 > "$OUT/vmstat_$tag.log" & vm=$!
    # (the process tree 40 s in: which workers are forked from the zygotes, which are fresh interpreters)
    (sleep "${PS_AT:-40}"; ps -eo pid,ppid,etimes,args --forest | cut -c1-200 > "$OUT/ps_$tag.txt") &
    local start; start=$(date +%s.%N)
    (cd "$dir" && rm -rf .tdiff .hypothesis && PYTHONPATH=$PWD $PY -m pytest -p tdiff.plugin --tdiff suites -n 8 \
        -p no:cacheprovider --tdiff-json "$OUT/where_$tag.json" ${ARGS:-} > "$OUT/where_$tag.txt" 2>&1; \
        rc=$?; times > "$OUT/times_$tag.txt"; exit $rc)
    local rc=$?
    kill $vm
    # (a red run's reproducers and corpus entries: the machine and its run directory go with the session)
    [ $rc -ne 0 ] && tar -czf "$OUT/red_$tag.tgz" -C "$dir/.tdiff" repro corpus 2>/dev/null
    summary "main job $tag (fresh cache): exit $rc, $((SECONDS - t0)) s; $(tail -1 "$OUT/where_$tag.txt")"
    summary "CPU time of the run's waited-for processes (user, system): $(tail -1 "$OUT/times_$tag.txt")"
    $PY -m bench.speed.launcher_cost --cache "$TRITON_CACHE_DIR" > "$OUT/launchers_$tag.txt" 2>&1
    summary "$(cat "$OUT/launchers_$tag.txt")"
    $PY -m bench.speed.wall_profile "$OUT/where_$tag.json" --vmstat "$OUT/vmstat_$tag.log" --top 25 --run-start "$start" \
        > "$OUT/where_$tag.md" 2>&1
    summary "$(sed -n 1,9p "$OUT/where_$tag.md")"
    $PY -m bench.speed.wall_profile "$OUT/where_$tag.json" --only suites.liger,suites.flaggems --top 0 > "$OUT/real_$tag.md" 2>&1
    summary "real suites within it: $(sed -n 1,7p "$OUT/real_$tag.md" | tr '\n' ' ')"
}

step_cpu_roles() {  # the main job on a fresh Triton cache, its CPU time by kind of process (bench/speed/cpu_by_process.py)
    local t0=$SECONDS tag=${TAG:-now}
    export TRITON_CACHE_DIR; TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-cache-XXXX)
    rm -rf .tdiff .hypothesis
    $PY -m bench.speed.cpu_by_process --interval 0.25 --json "$OUT/cpu_roles_$tag.json" -- $PY -m pytest -p tdiff.plugin \
        --tdiff suites -n 8 -p no:cacheprovider --tdiff-json "$OUT/roles_where_$tag.json" ${ARGS:-} \
        > "$OUT/cpu_roles_$tag.txt" 2>&1
    summary "main job $tag, CPU by process: exit $?, $((SECONDS - t0)) s; $(tail -14 "$OUT/cpu_roles_$tag.txt")"
}

step_collect() {  # how long the test processes take to start and collect the suites (no check runs)
    local t0=$SECONDS
    $PY -m pytest -p tdiff.plugin --tdiff suites -n 8 -p no:cacheprovider --collect-only -q > "$OUT/collect.txt" 2>&1
    summary "collect only, -n 8: exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/collect.txt")"
}

step_imports() {  # what one process's imports cost here (a test process collects the suites; each lane imports)
    local t0
    for mod in "torch" "triton" "tdiff.plugin" "suites.liger.softmax" "suites.flaggems.bmm" "suites"; do
        t0=$(date +%s.%N)
        $PY -X importtime -c "import torch, triton, tdiff.plugin; import $mod" 2> "$OUT/importtime.txt" >/dev/null
        summary "import $mod (after torch, triton, tdiff.plugin): $(sort -t'|' -k2 -n "$OUT/importtime.txt" | tail -1 | \
            cut -c1-120); whole process $(since "$t0") s"
    done
    t0=$(date +%s.%N)
    $PY -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
    summary "a CUDA context: process $(since "$t0") s"
    sort -t'|' -k2 -n "$OUT/importtime.txt" | tail -25 > "$OUT/importtime_top.txt"
}

step_ahead_test() {  # the compile-ahead GPU test (each binary compiled once across the GPU and compile workers)
    $PY -m pytest tests/test_gpu.py -k "ahead or cached_second" -q -s -p no:cacheprovider > "$OUT/ahead_test.txt" 2>&1
    summary "ahead test: exit $?; $(grep -E 'compile_ahead=|passed|failed' "$OUT/ahead_test.txt" | tr '\n' ' ' | cut -c1-700)"
}

step_real_where() {  # the real suites (liger, FlagGems) on a fresh Triton cache, and where their time went; TAG, ARGS
    local t0=$SECONDS tag=${TAG:-now}
    export TRITON_CACHE_DIR; TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-cache-XXXX)
    rm -rf .tdiff .hypothesis
    $PY -m pytest -p tdiff.plugin --tdiff suites/liger suites/flaggems -n 8 -p no:cacheprovider -q \
        --tdiff-json /tmp/real_$tag.json ${ARGS:-} > /tmp/real_$tag.txt 2>&1
    summary "real suites $tag (fresh cache): exit $?, $((SECONDS - t0)) s; $(tail -1 /tmp/real_$tag.txt)"
    $PY -m bench.speed.wall_profile /tmp/real_$tag.json --top 10 > "$OUT/real_where_$tag.md" 2>&1
    summary "$(sed -n 1,6p "$OUT/real_where_$tag.md")"
}

step_stages_cost() {  # what one compile costs, stage by stage, on this machine's CPU (bench/speed/compile_stages.py)
    $PY -m bench.speed.compile_stages > "$OUT/compile_stages.txt" 2>&1
    summary "compile stages: exit $?; $(tail -2 "$OUT/compile_stages.txt" | tr '\n' ' ')"
}

step_bench1() {  # bench/speed/per_case.py on one-program grids: tdiff's cost per case against the bare loop
    local t0=$SECONDS
    $PY -m bench.speed.per_case --quick --grids 1 ${BENCH_ARGS:-} > "$OUT/bench1_${TAG:-now}.txt" 2>&1
    summary "bench/speed/per_case.py --grids 1 ($TAG): exit $?, $((SECONDS - t0)) s; $(grep 'per case' "$OUT/bench1_${TAG:-now}.txt")"
}

step_soak() {  # the seed soak (bench/trust/soak.py): the main job at SOAK_SEEDS random seeds, a fresh Triton cache each,
    # no seed started that would end past SOAK_BUDGET seconds
    local t0=$SECONDS
    rm -rf .tdiff .hypothesis
    $PY -m bench.trust.soak --seeds "${SOAK_SEEDS:-2}" -n 8 --fresh-triton-cache --out /tmp/soak ${SOAK_BUDGET:+--budget $SOAK_BUDGET} \
        > "$OUT/soak_${TAG:-now}.txt" 2>&1
    local rc=$?
    cp /tmp/soak/soak.md "$OUT/soak_${TAG:-now}.md" 2>/dev/null; cp /tmp/soak/soak.json "$OUT/soak_${TAG:-now}.json" 2>/dev/null
    for d in /tmp/soak/seed*; do  # each seed's pytest output, and the reproducers of a red one
        cp "$d/log.txt" "$OUT/soak_${TAG:-now}_$(basename "$d").log" 2>/dev/null
        [ -d "$d/run/repro" ] && tar -czf "$OUT/soak_${TAG:-now}_$(basename "$d")_repro.tgz" -C "$d/run" repro
    done
    summary "soak (${TAG:-now}): exit $rc, $((SECONDS - t0)) s; $(grep -E '^\[|budget|False-alarm' "$OUT/soak_${TAG:-now}.txt" | tr '\n' ' ')"
}

soaks() {  # soaks NAME N ARGS...: N seed soaks at once (bench/trust/soak.py ARGS, each under /tmp/NAME/p<i>, none
    # running past SOAK_KILL seconds); their logs in $OUT/NAME.txt, reports, seed logs, reproducers and corpus
    # entries in $OUT/NAME.tgz, a summary line
    local name=$1 n=$2 t0=$SECONDS i
    shift 2
    rm -rf "/tmp/$name" /tmp/"$name"_p*.txt
    for i in $(seq "$n"); do
        # (--out first: ARGS may end with `-- PYTEST_ARGS`)
        timeout "${SOAK_KILL:-100000}" $PY -m bench.trust.soak --out "/tmp/$name/p$i" "$@" > "/tmp/${name}_p$i.txt" 2>&1 &
    done
    wait
    cat /tmp/"$name"_p*.txt > "$OUT/$name.txt"
    (cd /tmp && tar -czf "$OUT/$name.tgz" "$name"_p*.txt $(ls -d "$name"/p*/soak.* "$name"/p*/seed*/log.txt \
        "$name"/p*/seed*/run.json "$name"/p*/seed*/run/repro "$name"/p*/seed*/run/corpus 2>/dev/null))
    summary "$name: $((SECONDS - t0)) s; $(grep -hE '^\[|budget' "$OUT/$name.txt" | tr '\n' ' ')"
}

step_soak2() {  # two soaks at once (-n 8 each, the host's 16 cores), SOAK_SEEDS seeds each, a fresh Triton cache per
    # seed; no seed started that would end past SOAK_BUDGET seconds
    soaks "soak2_${TAG:-now}" 2 --seeds "${SOAK_SEEDS:-2}" -n 8 --fresh-triton-cache ${SOAK_BUDGET:+--budget $SOAK_BUDGET}
}

step_soak_cpu() {  # the seed soak as a machine without a GPU runs it (CUDA hidden: interpreter against reference, the
    # path the README's first command takes on a laptop), on this machine's cores: CPU_PROCS soaks at once, each
    # CPU_SOAK_SEEDS seeds at -n CPU_N, none started that would end past CPU_SOAK_BUDGET seconds
    CUDA_VISIBLE_DEVICES= soaks soak_cpu "${CPU_PROCS:-1}" --seeds "${CPU_SOAK_SEEDS:-3}" -n "${CPU_N:-8}" \
        ${CPU_SOAK_BUDGET:+--budget $CPU_SOAK_BUDGET}
}

step_reach() {  # issue 57 on the compiled path: the generic RoPE check (liger 1) and the two three-way planted bugs
    local t0=$SECONDS
    $PY -m bench.power.rope --seeds ${REACH_SEEDS:-5} --examples ${REACH_EXAMPLES:-30} > "$OUT/reach_rope.txt" 2>&1
    summary "power_rope (compiled too): exit $?, $((SECONDS - t0)) s; $(tail -1 "$OUT/reach_rope.txt")"
    t0=$SECONDS
    $PY -m bench.power.power --no-originals --only rope_flag_row_stride,colsum16_transposed_tail --seeds ${REACH_SEEDS:-5} \
        --examples 50 --out "$OUT/reach_mutants.md" > "$OUT/reach_mutants.txt" 2>&1
    summary "three-way mutants (compiled too): exit $?, $((SECONDS - t0)) s; $(grep -m1 'found in at least' "$OUT/reach_mutants.md"); \
$(grep -E '^\| (rope_flag|colsum16)' "$OUT/reach_mutants.md" | cut -d'|' -f2,6,10 | tr '\n' ' ')"
}

step_gpu_arith() {  # the GPU's arithmetic as a modelled opinion: the tf32 -inf * subnormal case on the compiled kernel
    $PY -m pytest tests/test_gpu.py -k "tf32_dot_of_minus_inf" -q -s -p no:cacheprovider > "$OUT/gpu_arith.txt" 2>&1
    summary "gpu arithmetic test: exit $?; $(grep -E 'compiled|passed|failed' "$OUT/gpu_arith.txt" | tr '\n' ' ' | cut -c1-900)"
}

setup
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(main localize findings gpu_tests seeds stages)
for s in "${steps[@]}"; do "step_$s"; done
