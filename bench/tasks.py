#!/usr/bin/python3
"""halfgrad's bag and transformer beside the baselines a user could fit instead, on three tasks,
in one command.

Tasks (each made from a Debian package's data, nothing downloaded):
- langid: which of 7 languages a word is from (`halfgrad export-langid`: Debian's word lists);
- topics: 5 topics of long texts (tools/make_topics.py: Debian's `fortunes`);
- order: the order of three marker words among fillers decides the label (tools/make_order_task.py:
  Debian's `wamerican`); every bag is at chance (1/6) by construction.
Rows (each one trained model; test accuracy, wall seconds from start to summary, steps/s):
- halfgrad bag and transformer: `halfgrad train` with the flags in ROWS below plus --threads;
- logreg: TF-IDF + LogisticRegression (scikit-learn), char_wb 1-4-grams for langid, word
  1-2-grams otherwise, C=10, lbfgs, max_iter 1000;
- fasttext: Debian's fastText CLI (`fasttext supervised`), the settings in FASTTEXT below;
- torch: the same transformer in PyTorch (bench/torch_train.py, f32, the flags in TORCH below).
A row whose tool is missing (scikit-learn, fasttext, python3-torch) is reported as skipped.

Usage: /usr/bin/python3 bench/tasks.py --halfgrad build/bin/halfgrad [--tasks langid,topics,order]
       [--rows bag,transformer,logreg,fasttext,torch] [--threads 2] [--work DIR] [--json FILE]
       [--precision fp16,fp32]   (each halfgrad row once per precision: fp16 is the default O2)
       [--set ROW:TASK=FLAGS ...]   (replace one halfgrad row's flags, e.g. --set transformer:order="--layers 2")
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from halfgrad_tokenize import read_tsv  # noqa: E402

# halfgrad rows: flags per task (besides --train/--eval/--output-dir/--threads).
ROWS = {
    "bag": {
        "langid": "",  # the main job's recipe
        "topics": "--tokenizer words",
        "order": "--tokenizer words",
    },
    # The transformer's defaults (docs/classifier.md, "Transformer recipe") on topics and order;
    # on langid the best of its sweeps (BENCHMARKS.md, "Language id: one head over batches grouped
    # by length"): the bag's char n-grams, recipe and 2^20 buckets, one layer of width 32 with one
    # head and a narrow feed-forward block, the bag as a skip connection, the encoder branch dropped
    # for 3 examples of 4, batches of similar lengths.
    "transformer": {
        "langid": "--layers 1 --d-model 32 --heads 1 --dropout 0.5 --lr 1e-2 --batch-size 256 --pooling mean"
                  " --epochs 5 --d-ff 16 --weight-decay 0.1 --max-len 128 --buckets 1048576 --bag-skip"
                  " --encoder-drop-path 0.75 --group-by-length",
        "topics": "--tokenizer sentencepiece --layers 1",
        "order": "--tokenizer words --layers 1",
    },
}
FASTTEXT = {  # fastText's own supervised settings per task (langid: the best of a small sweep)
    "langid": "-minn 1 -maxn 5 -bucket 262144 -dim 32 -lr 1.0 -epoch 50",
    "topics": "-wordNgrams 2 -dim 32 -lr 0.5 -epoch 25",
    "order": "-wordNgrams 2 -dim 32 -lr 0.5 -epoch 25",
}
TORCH = {  # bench/torch_train.py: the same encoder classifier in PyTorch
    # langid: halfgrad's transformer row (hashed char n-grams, no positions, mean pooling, the row's
    # recipe; warmup 83 = 10% of 825 steps rounded up, clipping 1 and decay on matrices as halfgrad's Trainer).
    "langid": "--task langid --tokens char-ngrams --buckets 1048576 --positions none --decay matrices --clip 1"
              " --layers 1 --d_model 32 --heads 1 --d_ff 16 --dropout 0.5 --lr 1e-2 --wd 0.1 --batch 256 --epochs 5"
              " --warmup 83 --max_len 128 --bag_skip --encoder_drop_path 0.75 --group_by_length",
    "topics": "--task topics --tokens words --layers 1 --epochs 10",
    "order": "--task order --tokens words --layers 1 --epochs 10",
}


def make_data(task, halfgrad, work):
    out = os.path.join(work, task)
    if not os.path.exists(os.path.join(out, "test.tsv")):
        if task == "langid":
            cmd = [halfgrad, "export-langid", "--out", out]
        elif task == "topics":
            cmd = [sys.executable, os.path.join(ROOT, "tools", "make_topics.py"), "--out", out]
        else:
            cmd = [sys.executable, os.path.join(ROOT, "tools", "make_order_task.py"), "--out", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(out, "train.tsv"), os.path.join(out, "test.tsv")


def run_halfgrad(halfgrad, flags, train, test, threads, work, precision="fp16"):
    out = tempfile.mkdtemp(dir=work)
    cmd = [halfgrad, "train", "--train", train, "--eval", test, "--output-dir", out, "--save-strategy", "no",
           "--threads", str(threads)] + (["--precision", precision] if precision != "fp16" else []) + shlex.split(flags)
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - start
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    acc, steps_per_s, steps = None, None, None
    with open(os.path.join(out, "log.jsonl")) as f:
        for line in f:
            entry = json.loads(line)
            if "eval_accuracy" in entry:
                acc = entry["eval_accuracy"]
            if "train_steps_per_second" in entry:
                steps_per_s = entry["train_steps_per_second"]
            if "step" in entry:
                steps = entry["step"]
    shutil.rmtree(out, ignore_errors=True)
    return {"acc": acc, "wall": wall, "steps_per_s": steps_per_s, "steps": steps, "cmd": " ".join(cmd[1:])}


def run_logreg(task, train, test):
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return {"skipped": "python3-sklearn not installed"}
    start = time.time()
    tr_y, tr_x = read_tsv(train)
    te_y, te_x = read_tsv(test)
    vec = (TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4)) if task == "langid"
           else TfidfVectorizer(ngram_range=(1, 2)))
    clf = LogisticRegression(C=10, max_iter=1000).fit(vec.fit_transform(tr_x), tr_y)
    acc = float((clf.predict(vec.transform(te_x)) == __import__("numpy").array(te_y)).mean())
    return {"acc": acc, "wall": time.time() - start}


def run_fasttext(task, train, test, threads, work):
    exe = shutil.which("fasttext")
    if not exe:
        return {"skipped": "fasttext not installed (apt-get install fasttext)"}
    files = {}
    for name, path in (("train", train), ("test", test)):
        files[name] = os.path.join(work, f"{task}.{name}.ft")
        labels, texts = read_tsv(path)
        with open(files[name], "w", encoding="utf-8") as f:
            f.writelines(f"__label__{y} {x}\n" for y, x in zip(labels, texts))
    model = os.path.join(work, f"{task}.ft")
    start = time.time()
    subprocess.run([exe, "supervised", "-input", files["train"], "-output", model, "-thread", str(threads),
                    "-verbose", "0"] + shlex.split(FASTTEXT[task]), check=True, capture_output=True)
    out = subprocess.run([exe, "test", model + ".bin", files["test"]], check=True, capture_output=True, text=True)
    wall = time.time() - start
    acc = float(re.search(r"P@1\s+([0-9.]+)", out.stdout).group(1))
    return {"acc": acc, "wall": wall, "cmd": "fasttext supervised " + FASTTEXT[task]}


def run_torch(task, train, test, threads):
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode != 0:
        return {"skipped": "python3-torch not installed"}
    cmd = [python, os.path.join(HERE, "torch_train.py"), "--train", train, "--test", test,
           "--threads", str(threads)] + shlex.split(TORCH[task])
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - start
    m = re.search(r"FINAL .* steps=(\d+) test_acc=([0-9.]+)", proc.stdout)
    if proc.returncode != 0 or not m:
        return {"error": (proc.stderr.strip().splitlines() or ["no FINAL line"])[-1]}
    steps = int(m.group(1))
    return {"acc": float(m.group(2)), "wall": wall, "steps": steps, "steps_per_s": steps / wall,
            "cmd": "torch_train.py " + TORCH[task]}


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--halfgrad", default=os.path.join(ROOT, "build", "bin", "halfgrad"))
    ap.add_argument("--tasks", default="langid,topics,order")
    ap.add_argument("--rows", default="bag,transformer,logreg,fasttext,torch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="", help="data and scratch folder (default: a temporary one)")
    ap.add_argument("--json", default="", help="also write every row as JSON lines here")
    ap.add_argument("--precision", default="fp16",
                    help="comma list of halfgrad --precision values to run each halfgrad row at (fp16: O2)")
    ap.add_argument("--set", action="append", default=[], metavar="ROW:TASK=FLAGS",
                    help="replace a halfgrad row's flags for one task")
    args = ap.parse_args()
    for s in args.set:
        m = re.fullmatch(r"(\w+):(\w+)=(.*)", s)
        if not m or m.group(1) not in ROWS or m.group(2) not in ROWS[m.group(1)]:
            ap.error(f"--set {s!r}: expected ROW:TASK=FLAGS with ROW in {list(ROWS)} and TASK in langid, topics, order")
        ROWS[m.group(1)][m.group(2)] = m.group(3)
    work = args.work or tempfile.mkdtemp(prefix="halfgrad-tasks-")
    os.makedirs(work, exist_ok=True)
    results = []
    for task in args.tasks.split(","):
        train, test = make_data(task, args.halfgrad, work)
        print(f"\n## {task}  ({len(read_tsv(train)[0])} train, {len(read_tsv(test)[0])} test)")
        print(f"| model | test acc % | wall s | steps/s | command |\n|---|---|---|---|---|")
        runs = [(r, p) for r in args.rows.split(",") for p in (args.precision.split(",") if r in ROWS else [""])]
        for row, precision in runs:
            row_name = row
            if row in ROWS:
                r = run_halfgrad(args.halfgrad, ROWS[row][task], train, test, args.threads, work, precision)
                r.setdefault("cmd", f"halfgrad train {ROWS[row][task]}")
                r["precision"] = precision
                row_name = row if precision == "fp16" else f"{row} {precision}"
            elif row == "logreg":
                r = run_logreg(task, train, test)
                r["cmd"] = "TF-IDF " + ("char_wb 1-4" if task == "langid" else "word 1-2") + " + LogisticRegression"
            elif row == "fasttext":
                r = run_fasttext(task, train, test, args.threads, work)
            elif row == "torch":
                r = run_torch(task, train, test, args.threads)
            else:
                ap.error(f"--rows: unknown row {row!r}")
            r.update(task=task, model=row)
            results.append(r)
            note = r.get("skipped") or r.get("error")
            acc = 100 * r["acc"] if r.get("acc") is not None else None
            print(f"| {row_name} | {fmt(acc, '.2f') if not note else note} | {fmt(r.get('wall'), '.1f')} | "
                  f"{fmt(r.get('steps_per_s'), '.1f')} | `{r.get('cmd', '')}` |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in results)


if __name__ == "__main__":
    main()
