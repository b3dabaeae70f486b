#!/bin/bash
# tools/to_torch.py against `halfgrad predict --logits`: trains tiny f32 models (bytes with mean and
# CLS pooling, char-ngram and word bags, a char-ngram model with a layer and CLS, ordered words (also
# with --bag-skip) and sentencepiece with positions; a few steps) on a
# small TSV, rebuilds each in stock torch.nn and requires the logits to
# agree within the tool's f32 tolerance; then feeds the tool logits off by 1e-3 and requires it to
# fail naming the difference. Exit 77 (CTest's skip) without /usr/bin/python3 or python3-torch.
#   to_torch_roundtrip.sh HALFGRAD_PROGRAM TO_TORCH_PY
set -u
halfgrad=$1 tool=$2
if ! [ -x /usr/bin/python3 ]; then
  echo "skipped: /usr/bin/python3 is not installed"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for i in 1 2 3 4 5 6; do
  printf 'en\tthe cat sat on the mat %s\nde\tdie Katze sa\xc3\x9f auf %s\nfr\tle chat \xc3\xa9tait l\xc3\xa0 %s\n' $i $i $i
done > "$dir/train.tsv"
printf 'en\ta dog\nde\tein Hund und eine Katze, viel l\xc3\xa4nger als max_len\nfr\tun chien\n' > "$dir/test.tsv"

for pooling in mean cls; do
  "$halfgrad" train --train "$dir/train.tsv" --tokenizer bytes --precision fp32 --pooling $pooling --d-model 16 --heads 4 --layers 2 \
    --d-ff 32 --max-len 16 --batch-size 6 --max-steps 4 --save-steps 4 --lr 1e-2 --threads 1 \
    --output-dir "$dir/out-$pooling" > "$dir/train-$pooling.log" 2>&1 \
    || { cat "$dir/train-$pooling.log"; fail "halfgrad train ($pooling)"; }
done
# The main job's kinds of model: bags of hashed char n-grams and words (no positions, no layers),
# mean pooling, and a char n-gram bag under one encoder layer with CLS pooling.
for tokenizer in char-ngrams words; do
  "$halfgrad" train --train "$dir/train.tsv" --tokenizer $tokenizer --buckets 4096 --precision fp32 --d-model 16 \
    --layers 0 --max-len 24 --batch-size 6 --max-steps 4 --save-steps 4 --lr 1e-2 --threads 1 \
    --output-dir "$dir/out-$tokenizer" > "$dir/train-$tokenizer.log" 2>&1 \
    || { cat "$dir/train-$tokenizer.log"; fail "halfgrad train ($tokenizer)"; }
done
"$halfgrad" train --train "$dir/train.tsv" --tokenizer char-ngrams --buckets 4096 --precision fp32 --pooling cls \
  --d-model 16 --heads 4 --layers 1 --d-ff 32 --max-len 24 --batch-size 6 --max-steps 4 --save-steps 4 --lr 1e-2 \
  --threads 1 --output-dir "$dir/out-bag-cls" > "$dir/train-bag-cls.log" 2>&1 \
  || { cat "$dir/train-bag-cls.log"; fail "halfgrad train (char-ngrams, cls)"; }
# Ordered tokens with learned positions: words alone (no bigrams) under a layer, and a
# SentencePiece model (when python3-sentencepiece is there to tokenize for the tool).
"$halfgrad" train --train "$dir/train.tsv" --tokenizer words --buckets 4096 --precision fp32 --d-model 16 --heads 4 \
  --layers 1 --d-ff 32 --max-len 24 --batch-size 6 --max-steps 4 --save-steps 4 --lr 1e-2 --threads 1 \
  --output-dir "$dir/out-words-ordered" > "$dir/train-words-ordered.log" 2>&1 \
  || { cat "$dir/train-words-ordered.log"; fail "halfgrad train (words, positions)"; }
# The same with --bag-skip: the bag's mean of layer-normed token rows joins the pooled output.
"$halfgrad" train --train "$dir/train.tsv" --tokenizer words --buckets 4096 --precision fp32 --d-model 16 --heads 4 \
  --layers 1 --d-ff 32 --max-len 24 --batch-size 6 --max-steps 4 --save-steps 4 --lr 1e-2 --threads 1 --bag-skip \
  --output-dir "$dir/out-words-skip" > "$dir/train-words-skip.log" 2>&1 \
  || { cat "$dir/train-words-skip.log"; fail "halfgrad train (words, positions, bag skip)"; }
checkpoints=("$dir/out-mean/checkpoint-4" "$dir/out-cls/checkpoint-4" "$dir/out-char-ngrams/checkpoint-4"
  "$dir/out-words/checkpoint-4" "$dir/out-bag-cls/checkpoint-4" "$dir/out-words-ordered/checkpoint-4"
  "$dir/out-words-skip/checkpoint-4")
if /usr/bin/python3 -c 'import sentencepiece' 2>/dev/null; then
  "$halfgrad" train --train "$dir/train.tsv" --tokenizer sentencepiece --vocab-size 30 --precision fp32 --d-model 16 \
    --heads 4 --layers 1 --d-ff 32 --max-len 24 --batch-size 6 --max-steps 4 --save-steps 4 --lr 1e-2 --threads 1 \
    --output-dir "$dir/out-spm" > "$dir/train-spm.log" 2>&1 || { cat "$dir/train-spm.log"; fail "halfgrad train (sentencepiece)"; }
  checkpoints+=("$dir/out-spm/checkpoint-4")
fi
/usr/bin/python3 "$tool" "${checkpoints[@]}" --data "$dir/test.tsv" --halfgrad "$halfgrad"
code=$?
[ $code -eq 77 ] && exit 77  # the tool's skip: no torch (or numpy)
[ $code -eq 0 ] || fail "to_torch.py disagrees with halfgrad"

# The check can fail: logits changed by 1e-3 must be caught.
checkpoint="$dir/out-mean/checkpoint-4"
"$halfgrad" predict --logits --checkpoint "$checkpoint" "a dog" "un chien" > "$dir/logits.jsonl" 2>/dev/null \
  || fail "halfgrad predict --logits"
/usr/bin/python3 - "$dir/logits.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
rows[1]["logits"][0] += 1e-3
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
output=$(/usr/bin/python3 "$tool" "$checkpoint" --texts "a dog" "un chien" --logits-file "$dir/logits.jsonl" 2>&1)
code=$?
echo "$output"
[ $code -eq 1 ] || fail "to_torch.py exited $code on logits off by 1e-3, expected 1"
grep -q "FAIL: .*checkpoint-4: max abs diff 0.001 > tolerance 1e-05" <<< "$output" || fail "to_torch.py did not name the difference"
echo "ok"
