#!/usr/bin/env bash
# Loads a run's report.html (`halfgrad train --report-to html --inspect N`) in headless Chromium
# and checks that its script ran to the end (body[data-ready] = the number of figures) with no
# script error: the page writes errors into #errors, which --dump-dom shows, and the console
# (--enable-logging=stderr) must hold no "Uncaught". A copy of the page with a deliberate error
# must be caught by the same checks. Skipped (exit 77) without /usr/bin/chromium (Debian's
# chromium package, an optional test tool).
# Usage: report_in_chromium.sh HALFGRAD_BINARY
set -euo pipefail
halfgrad=$1
chromium=/usr/bin/chromium
[ -x "$chromium" ] || { echo "chromium not installed (apt-get install chromium): skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 24); do
  printf 'class%d\t%s\n' $((i % 3)) "$(printf 'abcdefgh' | cut -c$((i % 3 * 2 + 1))-$((i % 3 * 2 + 2)))xy$i"
done > "$work/train.tsv"
head -n 9 "$work/train.tsv" > "$work/eval.tsv"
"$halfgrad" train --precision fp16 --d-model 8 --heads 2 --layers 1 --d-ff 16 --max-len 8 --batch-size 4 --threads 1 \
  --tokenizer bytes --epochs 2 --logging-steps 2 --inspect 3 --report-to jsonl html --train "$work/train.tsv" \
  --eval "$work/eval.tsv" --output-dir "$work/out" > "$work/train.log"
[ -s "$work/out/report.html" ] || { echo "no report.html"; cat "$work/train.log"; exit 1; }

# Prints the page's DOM after its scripts ran; the console goes to $2.
load() {
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$work/profile" \
    --enable-logging=stderr --v=0 --dump-dom "file://$1" 2> "$2"
}
# 0 when the page loaded cleanly: every figure counted by the script, no error in the DOM or console.
clean() {
  local dom=$1 console=$2
  grep -q 'data-ready="5"' "$dom" && ! grep -q '<pre id="errors"[^>]*>[^<]' "$dom" && ! grep -q 'Uncaught' "$console"
}
load "$work/out/report.html" "$work/console.log" > "$work/dom.html"
if ! clean "$work/dom.html" "$work/console.log"; then
  echo "report.html did not load cleanly:"; grep -o 'data-ready="[0-9]*"' "$work/dom.html" || echo "(no data-ready)"
  grep -o '<pre id="errors"[^>]*>[^<]*' "$work/dom.html"; grep 'Uncaught\|CONSOLE' "$work/console.log" | head -20
  exit 1
fi
# The checks can fail: the same page with a script error after the report's own script.
sed 's|</body>|<script>undefined_function();</script></body>|' "$work/out/report.html" > "$work/broken.html"
load "$work/broken.html" "$work/broken-console.log" > "$work/broken-dom.html"
if clean "$work/broken-dom.html" "$work/broken-console.log"; then
  echo "a page with a script error passed the checks"; exit 1
fi
echo "report.html loads in $("$chromium" --version) without script errors"
