#!/usr/bin/env bash
# `halfgrad train` under mpirun with two ranks (registered by tests/CMakeLists.txt, label mpi):
#   run              a small data-parallel run: exit 0, rank 0 alone prints the table, writes the
#                    checkpoints and the log (with the wire's bytes and the fp16 cast's counts),
#                    and --inspect reports the fp16 cast of the gradients
#   fp8_scales_agree --precision fp8 with exact, most-recent scales (every amax difference
#                    shows in the scales): the ranks take the max of their amaxes, so the replica
#                    check, which compares the fp8 scale state too, passes at every step
#   unreadable_data  rank 1's data file fails to read (a line without a tab) while rank 0's reads:
#                    every rank stops with one message naming rank 1 and the file, exit 1, no hang;
#                    then rank 1's file is missing (the command line rejects it before MPI starts):
#                    the job still ends, non-zero
#   different_flags  the ranks get different --lr: one message naming the setting and both values
#   resume_one_rank  --resume given to rank 1 only (and then two different checkpoints): one
#                    agreed message naming the setting, exit 1, no hang, and no file left in the
#                    output directory (the ranks compare --resume before restoring anything)
#   threads_auto     --threads auto under mpirun (step times would measure the slowest rank, not
#                    the local team): one message naming the flag, exit 1, before any output
# Usage: halfgrad_under_mpirun.sh TEST HALFGRAD MPIEXEC NUMPROC_FLAG [MPIEXEC_PREFLAGS...]
set -uo pipefail
test_name=$1 halfgrad=$2 mpiexec=$3 np=$4
shift 4
pre=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tiny=(train --train-per-language 30 --test-per-language 10 --buckets 4096 --batch-size 16)
small=("${tiny[@]}" --threads 1)

fail() {
  echo "FAILED: $*"
  echo "--- output:"
  cat "$tmp/out.txt"
  exit 1
}
# Runs mpiexec with the given per-rank arguments (an MPMD command line), output in out.txt.
launch() {
  timeout 100 "$mpiexec" "${pre[@]}" "$@" >"$tmp/out.txt" 2>&1
}
count() { grep -c -- "$1" "$tmp/out.txt"; }

case $test_name in
  run)
    launch "$np" 2 "$halfgrad" "${small[@]}" --max-steps 6 --logging-steps 3 --save-steps 3 --ddp-comm fp16 \
      --ddp-check-every 2 --inspect 3 --output-dir "$tmp/out" || fail "exit code $?"
    [ "$(count 'epoch     step train_loss')" -eq 1 ] || fail "the table header is not printed exactly once"
    [ "$(count 'x 2 processes, --ddp-comm fp16')" -eq 1 ] || fail "the model line does not show the 2 processes"
    [ -f "$tmp/out/checkpoint-6/trainer_state.json" ] || fail "rank 0 wrote no checkpoint-6"
    grep -q '"ddp_bytes_per_step"' "$tmp/out/log.jsonl" || fail "the log has no ddp_bytes_per_step"
    grep -q '"ddp_wire":{"flushed"' "$tmp/out/log.jsonl" || fail "the log has no fp16 wire counts"
    # --inspect 3: steps 3 and 6 are inspected (rank 0 prints), each with the wire's line and JSON
    [ "$(count 'gradient wire fp16 (this rank.s g / W times the loss scale): [1-9][0-9]* values')" -eq 2 ] ||
      fail "the inspector does not report the fp16 wire cast of steps 3 and 6"
    [ "$(grep -c '"ddp_wire":{"flushed"' "$tmp/out/numerics.jsonl")" -eq 2 ] ||
      fail "numerics.jsonl has no wire counts for steps 3 and 6"
    [ "$(grep -c '"step":3[,}]' "$tmp/out/log.jsonl")" -eq 1 ] || fail "step 3 is logged more than once"
    ;;
  fp8_scales_agree)
    launch "$np" 2 "$halfgrad" "${small[@]}" --max-steps 6 --precision fp8 --fp8-scale exact \
      --fp8-amax-compute-algo most_recent --ddp-check-every 1 --output-dir "$tmp/out" || fail "exit code $?"
    [ -f "$tmp/out/checkpoint-6/fp8_scaling.json" ] || fail "checkpoint-6 holds no fp8 scale state"
    ;;
  unreadable_data)
    printf 'en\thello\nde\thallo\n' >"$tmp/good.tsv"
    printf 'en\thello\nthis line has no tab\n' >"$tmp/bad.tsv"
    launch "$np" 1 "$halfgrad" train --train "$tmp/good.tsv" --max-steps 2 --output-dir "$tmp/out" : \
      "$np" 1 "$halfgrad" train --train "$tmp/bad.tsv" --max-steps 2 --output-dir "$tmp/out"
    status=$?
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "exit code $status (124: timed out)"
    [ "$(count 'halfgrad: error')" -eq 1 ] || fail "not exactly one error message"
    grep -q "halfgrad: error: rank 1: $tmp/bad.tsv:2: expected 'label<TAB>text', found no tab" "$tmp/out.txt" ||
      fail "the message does not name rank 1 and the line"
    launch "$np" 1 "$halfgrad" train --train "$tmp/good.tsv" --max-steps 2 --output-dir "$tmp/out" : \
      "$np" 1 "$halfgrad" train --train "$tmp/missing.tsv" --max-steps 2 --output-dir "$tmp/out"
    status=$?
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "missing file: exit code $status (124: timed out)"
    grep -q "missing.tsv" "$tmp/out.txt" || fail "missing file: the message does not name it"
    ;;
  different_flags)
    launch "$np" 1 "$halfgrad" "${small[@]}" --max-steps 2 --lr 0.01 --output-dir "$tmp/out" : \
      "$np" 1 "$halfgrad" "${small[@]}" --max-steps 2 --lr 0.02 --output-dir "$tmp/out"
    status=$?
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "exit code $status (124: timed out)"
    [ "$(count 'halfgrad: error')" -eq 1 ] || fail "not exactly one error message"
    grep -q "differ across ranks: /training_args/learning_rate is 0.0099.* on rank 0 but 0.0199.* on rank 1" \
      "$tmp/out.txt" || fail "the message does not name learning_rate and both values"
    [ ! -e "$tmp/out" ] || fail "an output directory was created before the check"
    ;;
  resume_one_rank)
    launch "$np" 2 "$halfgrad" "${small[@]}" --max-steps 4 --save-steps 2 --output-dir "$tmp/first" ||
      fail "the first run: exit code $?"
    launch "$np" 1 "$halfgrad" "${small[@]}" --max-steps 6 --output-dir "$tmp/out" : \
      "$np" 1 "$halfgrad" "${small[@]}" --max-steps 6 --output-dir "$tmp/out" --resume "$tmp/first/checkpoint-4"
    status=$?
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "exit code $status (124: timed out)"
    [ "$(count 'halfgrad: error')" -eq 1 ] || fail "not exactly one error message"
    grep -q "the runs' --resume checkpoints differ across ranks: /resume is null on rank 0 but \"$tmp/first/checkpoint-4\" on rank 1" \
      "$tmp/out.txt" || fail "the message does not name --resume and both values"
    grep -q -e "bad_alloc" -e "unpack" "$tmp/out.txt" && fail "an MPI or allocation error escaped"
    [ -z "$(ls -A "$tmp/out" 2>/dev/null)" ] || fail "the failed start left files in the output directory"
    launch "$np" 1 "$halfgrad" "${small[@]}" --max-steps 6 --output-dir "$tmp/out" --resume "$tmp/first/checkpoint-2" : \
      "$np" 1 "$halfgrad" "${small[@]}" --max-steps 6 --output-dir "$tmp/out" --resume "$tmp/first/checkpoint-4"
    status=$?
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "two checkpoints: exit code $status (124: timed out)"
    grep -q "the runs' --resume checkpoints differ across ranks: /manifest_sha256 is" "$tmp/out.txt" ||
      grep -q "the runs' --resume checkpoints differ across ranks: /resume is" "$tmp/out.txt" ||
      fail "two checkpoints: the message does not name --resume"
    [ -z "$(ls -A "$tmp/out" 2>/dev/null)" ] || fail "two checkpoints: the failed start left files"
    ;;
  threads_auto)
    launch "$np" 2 "$halfgrad" "${tiny[@]}" --threads auto --max-steps 2 --output-dir "$tmp/out"
    status=$?
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "exit code $status (124: timed out)"
    [ "$(count 'halfgrad: error')" -eq 1 ] || fail "not exactly one error message"
    grep -q -- "--threads auto times one process's steps" "$tmp/out.txt" || fail "the message does not name --threads auto"
    [ ! -e "$tmp/out" ] || fail "an output directory was created before the check"
    ;;
  *)
    echo "unknown test $test_name"
    exit 2
    ;;
esac
echo "$test_name: passed"
