#!/usr/bin/env bash
# The "Distributed" section of BENCHMARKS.md: data-parallel training on this machine, and a
# paper estimate of scaling out. Needs a Release build with HALFGRAD_MPI (build/bin/halfgrad,
# bench_ddp, bench_step). Prints every measurement, then the estimate.
#   1. the main job (`halfgrad train` defaults, 1 epoch, no checkpoints): 1 process x 2 threads,
#      2 ranks x 1 thread at batch 128 (the same global batch 256 and step count), and 2 ranks
#      x 1 thread at the default batch 256 per rank (global 512); steps/s and test accuracy;
#   2. the bytes each rank sends per step (log.jsonl's ddp_bytes_per_step) in f32 and fp16;
#   3. bench_ddp: MPI_Allgatherv (loopback, shared memory) and reduce_gradients times;
#   4. config M (bench_step): ms per step in 1 process x 2 threads and 2 ranks x 1 thread;
#   5. the estimate for 8 and 64 machines (model below).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe -np 2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(train --epochs 1 --save-strategy no --logging-steps 10)

summary() {  # steps/s and accuracy from a run's output
  grep -E "steps/s|test accuracy" "$1" | tr '\n' ' '
  echo
}
echo "== main job, 1 epoch"
"$bin/halfgrad" "${common[@]}" --threads 2 --output-dir "$tmp/one" >"$tmp/one.txt"
echo "1 process x 2 threads, batch 256: $(summary "$tmp/one.txt")"
"${mpirun[@]}" "$bin/halfgrad" "${common[@]}" --threads 1 --batch-size 128 --output-dir "$tmp/two128" >"$tmp/two128.txt"
echo "2 ranks x 1 thread, batch 128 per rank (global 256), f32 wire: $(summary "$tmp/two128.txt")"
"${mpirun[@]}" "$bin/halfgrad" "${common[@]}" --threads 1 --output-dir "$tmp/two256" >"$tmp/two256.txt"
echo "2 ranks x 1 thread, batch 256 per rank (global 512), f32 wire: $(summary "$tmp/two256.txt")"
"${mpirun[@]}" "$bin/halfgrad" "${common[@]}" --threads 1 --ddp-comm fp16 --output-dir "$tmp/two256h" >"$tmp/two256h.txt"
echo "2 ranks x 1 thread, batch 256 per rank (global 512), fp16 wire: $(summary "$tmp/two256h.txt")"

echo "== bytes each rank sends per step (mean over the logged steps, batch 256 per rank)"
for run in two256 two256h; do
  python3 - "$tmp/$run/log.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"ddp_bytes_per_step"' in l]
b = [r["ddp_bytes_per_step"] for r in rows]
wire = rows[-1].get("ddp_wire")
print(f"{sys.argv[1].split('/')[-2]}: {sum(b) / len(b):.0f} bytes per step (min {min(b)}, max {max(b)})"
      + (f"; fp16 cast over the run's last window: {wire}" if wire else ""))
EOF
done

echo "== bench_ddp (2 ranks, loopback)"
"${mpirun[@]}" "$bin/bench_ddp" | tee "$tmp/ddp.jsonl"

echo "== config M (bench_step --config M --precision fp16-O2)"
"$bin/bench_step" --config M --threads 2 --steps 10 --warmup 2 | tee "$tmp/m1.json"
"${mpirun[@]}" "$bin/bench_step" --config M --threads 1 --steps 10 --warmup 2 | head -1 | tee "$tmp/m2.json"

echo "== paper estimate"
python3 - "$tmp" <<'EOF'
import json, sys, re
tmp = sys.argv[1]
ddp = [json.loads(l) for l in open(f"{tmp}/ddp.jsonl")]
big = max((r for r in ddp if r["what"] == "allgatherv"), key=lambda r: r["floats"])
print(f"loopback MPI_Allgatherv at {big['bytes_sent_per_rank'] / 2**20:.0f} MiB per rank: {big['gb_per_s']:.2f} GB/s")
def rate(name):
    m = re.search(r"([0-9.]+) steps/s", open(f"{tmp}/{name}.txt").read())
    return float(m.group(1))
main_ms = 1000 / rate("one")  # one machine = this one, 2 threads, batch 256
main_params = int(re.search(r"model: (\d+) parameters", open(f"{tmp}/one.txt").read()).group(1))
m_ms = json.load(open(f"{tmp}/m1.json"))["ms_per_step"]
def mean_bytes(run):
    b = [json.loads(l)["ddp_bytes_per_step"] for l in open(f"{tmp}/{run}/log.jsonl") if '"ddp_bytes_per_step"' in l]
    return sum(b) / len(b)
sparse_f32, sparse_f16 = mean_bytes("two256"), mean_bytes("two256h")
m_params = json.load(open(f"{tmp}/m1.json"))["parameters"]
alpha = 20e-6  # per message latency (s)
print("model: each machine one rank with this machine's compute time per step; no overlap of")
print("communication with compute; ring allreduce 2(p-1)/p * N / B + 2(p-1) * alpha; halfgrad's")
print("rank-ordered allgather (p-1) * N / B + (p-1) * alpha; alpha = 20 us; B = link bandwidth")
for name, ms, rows in [("main job (sparse rows, allgather)", main_ms,
                        [("allgather f32", sparse_f32, "gather"), ("allgather fp16", sparse_f16, "gather"),
                         ("dense ring f32 (every parameter)", main_params * 4, "ring")]),
                       ("config M (dense)", m_ms,
                        [("ring f32", m_params * 4, "ring"), ("ring fp16", m_params * 2, "ring"),
                         ("allgather f32 (halfgrad)", m_params * 4, "gather"),
                         ("allgather fp16 (halfgrad)", m_params * 2, "gather")])]:
    print(f"{name}: compute {ms:.1f} ms per step")
    for label, n, kind in rows:
        cells = []
        for p in (8, 64):
            for gbit in (10, 25):
                bw = gbit * 1e9 / 8
                t = (2 * (p - 1) / p * n / bw + 2 * (p - 1) * alpha) if kind == "ring" else ((p - 1) * n / bw + (p - 1) * alpha)
                cells.append(f"p={p} {gbit}Gb/s: {t * 1e3:.1f} ms, eff {ms / (ms + t * 1e3):.0%}")
        print(f"  {label} ({n / 1e6:.2f} MB/rank): " + "; ".join(cells))
EOF
