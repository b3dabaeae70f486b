#!/usr/bin/env bash
# `halfgrad train` under mpirun with two ranks (registered by tests/CMakeLists.txt, label mpi):
#   run              a small data-parallel run: exit 0, rank 0 alone prints the table, writes the
#                    checkpoints and the log (with the wire's bytes and the fp16 cast's counts)
#   unreadable_data  rank 1's data file fails to read (a line without a tab) while rank 0's reads:
#                    every rank stops with one message naming rank 1 and the file, exit 1, no hang;
#                    then rank 1's file is missing (the command line rejects it before MPI starts):
#                    the job still ends, non-zero
#   different_flags  the ranks get different --lr: one message naming the setting and both values
# Usage: halfgrad_under_mpirun.sh TEST HALFGRAD MPIEXEC NUMPROC_FLAG [MPIEXEC_PREFLAGS...]
set -uo pipefail
test_name=$1 halfgrad=$2 mpiexec=$3 np=$4
shift 4
pre=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small=(train --train-per-language 30 --test-per-language 10 --buckets 4096 --batch-size 16 --threads 1)

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
      --ddp-check-every 2 --output-dir "$tmp/out" || fail "exit code $?"
    [ "$(count 'epoch     step train_loss')" -eq 1 ] || fail "the table header is not printed exactly once"
    [ "$(count 'x 2 processes, --ddp-comm fp16')" -eq 1 ] || fail "the model line does not show the 2 processes"
    [ -f "$tmp/out/checkpoint-6/trainer_state.json" ] || fail "rank 0 wrote no checkpoint-6"
    grep -q '"ddp_bytes_per_step"' "$tmp/out/log.jsonl" || fail "the log has no ddp_bytes_per_step"
    grep -q '"ddp_wire":{"flushed"' "$tmp/out/log.jsonl" || fail "the log has no fp16 wire counts"
    [ "$(grep -c '"step":3[,}]' "$tmp/out/log.jsonl")" -eq 1 ] || fail "step 3 is logged more than once"
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
  *)
    echo "unknown test $test_name"
    exit 2
    ;;
esac
echo "$test_name: passed"
