#!/usr/bin/python3
"""One halfgrad row of bench/tasks.py over several seeds and precisions: is a difference between
two precisions (or two recipes) larger than the spread between seeds?

Each seed trains once per precision (`halfgrad train ... --seed S --precision P`). The table gives
every run's test accuracy, then per precision the mean and sample standard deviation over seeds;
with two precisions, the per-seed difference (first listed minus second) with its mean and
standard error (sd / sqrt(n)): a mean difference within about two standard errors of 0 is not told
apart from seed spread.

Usage: /usr/bin/python3 bench/seeds.py --task topics --row transformer [--seeds 0-9]
       [--precision fp16,fp32] [--set FLAGS] [--threads 2] [--work DIR] [--halfgrad build/bin/halfgrad]
"""
import argparse
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tasks import ROOT, ROWS, make_data, run_halfgrad  # noqa: E402


def parse_seeds(text):
    """'0-9' or '0,3,5' -> a list of ints."""
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def summary(values):
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else float("nan")
    return mean, sd, sd / math.sqrt(len(values))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--halfgrad", default=os.path.join(ROOT, "build", "bin", "halfgrad"))
    ap.add_argument("--task", required=True, choices=["langid", "topics", "order"])
    ap.add_argument("--row", default="transformer", choices=list(ROWS))
    ap.add_argument("--set", default=None, help="the row's flags instead of bench/tasks.py's")
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--precision", default="fp16,fp32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/halfgrad-seeds")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    flags = args.set if args.set is not None else ROWS[args.row][args.task]
    precisions = args.precision.split(",")
    train, test = make_data(args.task, args.halfgrad, args.work)
    print(f"## {args.task}, {args.row}: `halfgrad train {flags} --seed S --precision P`, --threads {args.threads}")
    print("| seed | " + " | ".join(f"{p} acc %" for p in precisions) + " | wall s |")
    print("|---" * (len(precisions) + 2) + "|")
    acc = {p: [] for p in precisions}
    for seed in parse_seeds(args.seeds):
        walls = []
        for p in precisions:
            r = run_halfgrad(args.halfgrad, f"{flags} --seed {seed}", train, test, args.threads, args.work, p)
            if r.get("acc") is None:
                sys.exit(f"seed {seed}, {p}: {r.get('error', 'no eval_accuracy in log.jsonl')}")
            acc[p].append(100 * r["acc"])
            walls.append(f"{r['wall']:.1f}")
        print(f"| {seed} | " + " | ".join(f"{acc[p][-1]:.2f}" for p in precisions) + f" | {' / '.join(walls)} |",
              flush=True)
    for p in precisions:
        mean, sd, se = summary(acc[p])
        print(f"{p}: mean {mean:.2f}, sd {sd:.2f}, standard error {se:.2f} (n={len(acc[p])})")
    if len(precisions) == 2:
        diff = [a - b for a, b in zip(acc[precisions[0]], acc[precisions[1]])]
        mean, sd, se = summary(diff)
        print(f"{precisions[0]} - {precisions[1]}: mean {mean:+.2f} points, sd {sd:.2f}, standard error {se:.2f}")


if __name__ == "__main__":
    main()
