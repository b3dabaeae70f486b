#!/usr/bin/env bash
# compare.sh: halfgrad's training step (build/bin/bench_step) beside PyTorch's
# (bench/torch_step.py, Debian's python3-torch), interleaved in one run so both see the
# same machine load, and a ratio table at the end.
#
#   bash bench/compare.sh [--configs "S M"] [--threads "1 2"] [--rounds 3] [--steps 30] [--warmup 5]
#                         [--bf16-steps N] [--no-torch] [--busy] [--target AVX2]
#
# Each round runs, per config and thread count: bench_step in f32, fp16-O1, fp16-O2 and bf16, then
# torch_step.py --malloc tuned in fp32 twice, with OPENBLAS_CORETYPE unset (OpenBLAS picks its
# kernels for the CPU: the fast setting) and set (as exported, else Haswell), and in bf16
# autocast (oneDNN, not OpenBLAS: CORETYPE unset only). Without AVX512-BF16 PyTorch's bf16 step
# is 5-40x slower than its fp32 step, so --bf16-steps N times it over N steps after 1 warm-up
# (default: --steps and --warmup; 0 skips it). bench_step does not use OpenBLAS, so it runs once.
# Every measurement is appended as one JSON line to $LOG (default build/compare.jsonl); the table
# gives the median over rounds of each run's median ms per step, and the ratios:
#   f32/torch      our f32 over torch fp32 (CORETYPE unset; in parentheses: set)
#   O2/f32         our fp16 O2 over our f32
#   bf16/torch     our bf16 over torch bf16 autocast
#   O2/f32 peak RSS, O2/f32 peak tensors   memory of our fp16 O2 over our f32 (bench_step's
#                  peak_rss_mb and peak_tensor_mb)
# and, when several thread settings ran, the speed-up of each over the first (1 thread by default)
# per precision. A setting is a count or "auto" (bench_step --threads auto: halfgrad/base/adaptive_threads.h
# picks all cores or 1 per step; PyTorch is not run for it).
# --target AVX2 times, on an AVX-512 CPU, the code an AVX2-only CPU runs: bench_step's Highway
# kernels limited to AVX2 and below (bench/targets.h) with the exact bf16 path
# (HALFGRAD_EXACT_BF16=1: no VDPBF16PS), and PyTorch with ATEN_CPU_CAPABILITY=avx2,
# DNNL_MAX_CPU_ISA=AVX2 (oneDNN) and OPENBLAS_CORETYPE=Haswell in both of its fp32 runs. The
# caches, ports and clock are still this CPU's: a stand-in for an AVX2 machine, not one. PyTorch's
# bf16 step is not run there: oneDNN limited to AVX2 has no bf16 matmul (torch 1.13 stops with
# "could not create a primitive descriptor iterator").
# --no-torch runs bench_step alone. --busy keeps the last CPU busy with a spinning shell loop
# (taskset) for the whole run, as another program on a shared machine would: the case where a
# second thread must not make the step slower than one thread.
set -euo pipefail
cd "$(dirname "$0")/.."

configs="S M" threads="1 2" rounds=3 steps=30 warmup=5 bf16_steps= run_torch=1 busy=0 target=best
while [[ $# -gt 0 ]]; do
  case "$1" in
    --configs) configs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --bf16-steps) bf16_steps="$2"; shift 2 ;;
    --no-torch) run_torch=0; shift ;;
    --busy) busy=1; shift ;;
    --target) target="$2"; shift 2 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

bench=${BENCH:-build/bin/bench_step}  # BENCH=path compares another build
torch_step=bench/torch_step.py
[[ -x $bench ]] || { echo "compare.sh: build $bench first (cmake --build build --target bench_step)" >&2; exit 1; }
[[ -f $torch_step ]] || { echo "compare.sh: $torch_step not found" >&2; exit 1; }
log=${LOG:-build/compare.jsonl}
: >"$log"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load:$(uptime | sed 's/.*load average://'), log: $log" >&2
if ((busy)); then
  taskset -c "$(($(nproc) - 1))" bash -c 'while :; do :; done' &
  busy_pid=$!
  # Stopped however the script ends: an interrupted run (Ctrl-C, timeout's SIGTERM) once left the
  # loop spinning for half an hour under the next measurements.
  trap 'kill "$busy_pid" 2>/dev/null' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  echo "# CPU $(($(nproc) - 1)) kept busy by a spinning loop (pid $busy_pid)" >&2
fi

coretype=${OPENBLAS_CORETYPE:-Haswell}  # what some machines here export; the AVX2 kernels
case $target in
  best) ;;
  AVX2)
    export HALFGRAD_EXACT_BF16=1 ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
    echo "# target AVX2: bench_step --target AVX2, torch limited to AVX2 (OpenBLAS Haswell in both fp32 runs)" >&2 ;;
  *) echo "compare.sh: --target takes best or AVX2 (PyTorch has no other limit to match)" >&2; exit 2 ;;
esac
torch() {  # torch <config> <threads> <dtype> <coretype label> <steps> <warmup>
  local out ms
  if [[ $4 == unset && $target == best ]]; then
    out=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 "$torch_step" --config "$1" --threads "$2" \
          --dtype "$3" --malloc tuned --steps "$5" --warmup "$6" 2>/dev/null) || true
  else
    out=$(OPENBLAS_CORETYPE=$([[ $4 == unset ]] && echo Haswell || echo "$4") /usr/bin/python3 "$torch_step" --config "$1" --threads "$2" --dtype "$3" --malloc tuned \
          --steps "$5" --warmup "$6" 2>/dev/null) || true
  fi
  [[ $out == ms_per_step=* ]] || { echo "compare.sh: torch_step.py --config $1 --threads $2 --dtype $3 failed" >&2; exit 1; }
  ms=${out#ms_per_step=}
  printf '{"bench":"torch_step","config":"%s","precision":"%s","threads":%s,"coretype":"%s","ms_per_step":%s}\n' \
    "$1" "$3" "$2" "$4" "$ms" | tee -a "$log"
}

for ((r = 1; r <= rounds; ++r)); do
  for c in $configs; do
    for t in $threads; do
      for p in f32 fp16-O1 fp16-O2 bf16; do
        "$bench" --config "$c" --threads "$t" --precision "$p" --steps "$steps" --warmup "$warmup" --target "$target" |
          tee -a "$log"
      done
      ((run_torch)) || continue
      [[ $t =~ ^[0-9]+$ ]] || continue  # torch_step.py takes a count: "auto" is bench_step's alone
      torch "$c" "$t" fp32 unset "$steps" "$warmup"
      torch "$c" "$t" fp32 "$coretype" "$steps" "$warmup"
      if [[ $target == AVX2 ]]; then
        :  # oneDNN limited to AVX2 has no bf16 matmul ("could not create a primitive descriptor")
      elif [[ -z $bf16_steps ]]; then
        torch "$c" "$t" bf16 unset "$steps" "$warmup"
      elif ((bf16_steps > 0)); then
        torch "$c" "$t" bf16 unset "$bf16_steps" 1
      fi
    done
  done
done
echo "# done $(date -u '+%H:%M UTC'), load:$(uptime | sed 's/.*load average://')" >&2

/usr/bin/python3 - "$log" "$threads" <<'EOF'
import json, math, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def med(field='ms_per_step', **k):
    v = [r[field] for r in rows if field in r and all(r.get(a) == b for a, b in k.items())]
    return statistics.median(v) if v else float('nan')
def f(v, digits=1):
    return 'not run' if math.isnan(v) else f'{v:.{digits}f}'
for r in rows:
    r['threads'] = str(r['threads'])  # a count, or a label such as "auto"
order = {t: i for i, t in enumerate(sys.argv[2].split())}  # --threads' order
keys = sorted({(r['config'], r['threads']) for r in rows}, key=lambda k: (k[0], order.get(k[1], len(order))))
print('| config | threads | f32 | fp16-O1 | fp16-O2 | bf16 | torch fp32 | torch bf16 | f32/torch | O2/f32 | bf16/torch '
      '| O2/f32 peak RSS | O2/f32 peak tensors |')
print('|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for c, t in keys:
    ours = {p: med(bench='step', config=c, threads=t, precision=p) for p in ('f32', 'fp16-O1', 'fp16-O2', 'bf16')}
    fast = {d: med(bench='torch_step', config=c, threads=t, precision=d, coretype='unset') for d in ('fp32', 'bf16')}
    slow = statistics.median([r['ms_per_step'] for r in rows if r['bench'] == 'torch_step' and r['config'] == c
                              and r['threads'] == t and r['precision'] == 'fp32' and r['coretype'] != 'unset']
                             or [float('nan')])
    memory = {field: med(field, bench='step', config=c, threads=t, precision='fp16-O2') /
                     med(field, bench='step', config=c, threads=t, precision='f32')
              for field in ('peak_rss_mb', 'peak_tensor_mb')}
    print(f"| {c} | {t} | " + ' | '.join(f(ours[p]) for p in ours) +
          f" | {f(fast['fp32'])} ({f(slow)}) | {f(fast['bf16'])}"
          f" | {f(ours['f32'] / fast['fp32'], 2)} ({f(ours['f32'] / slow, 2)}) | {f(ours['fp16-O2'] / ours['f32'], 2)}"
          f" | {f(ours['bf16'] / fast['bf16'], 3)} | {f(memory['peak_rss_mb'], 2)} | {f(memory['peak_tensor_mb'], 2)} |")
print('ms per step, median over rounds; torch with --malloc tuned, OPENBLAS_CORETYPE unset (in parentheses: set, fp32 only)')
threads = sorted({t for _, t in keys}, key=lambda t: order.get(t, len(order)))
for other in threads[1:]:
    print()
    print(f'speed-up of threads {other} over {threads[0]} (median times):')
    for c in sorted({c for c, _ in keys}):
        ratios = []
        for p in ('f32', 'fp16-O1', 'fp16-O2', 'bf16'):
            base = med(bench='step', config=c, threads=threads[0], precision=p)
            ratios.append(f'{p} {f(base / med(bench="step", config=c, threads=other, precision=p), 2)}x')
        print(f'  {c}: ' + ', '.join(ratios))
teams = [r for r in rows if 'steps_per_team' in r]
if teams:
    print()
    print('threads auto, steps run at each team size (all runs, warm-up included):')
    for c in sorted({r['config'] for r in teams}):
        for p in ('f32', 'fp16-O1', 'fp16-O2', 'bf16'):
            runs = [r['steps_per_team'] for r in teams if r['config'] == c and r['precision'] == p]
            if runs:
                print(f'  {c} {p}: ' + '; '.join(', '.join(f'{t}: {n}' for t, n in sorted(run.items(), key=lambda tn: -int(tn[0])))
                                            for run in runs))
EOF
