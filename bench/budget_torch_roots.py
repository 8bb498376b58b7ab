#!/usr/bin/env python3
"""--max-overhead on the torch builds of the Debian roots (scripts/make-torch-root.sh trixie|sid):
whether every exact step a window writes holds what a plain recording's step holds.

For each root, tests/workloads/train_loop.py runs there (chroot) until killed; tprof records it
plainly for 3 s to learn the usual step (its ranges by name and count, the most common kind),
then with --max-overhead 20% for 10 s. It prints the windows' summary and how many exact steps
equal the usual step, with what differs in those that do not.

Usage (root): /usr/bin/python3 bench/budget_torch_roots.py [ROOT ...]
  (default: /var/cache/tprof/trixie-torch /var/cache/tprof/sid-torch; /proc mounted in each)
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPROF = os.path.join(REPO, "build", "tprof")
LOOP = os.path.join(REPO, "tests", "workloads", "train_loop.py")


def steps_of(path):
    """Each ProfilerStep's name and its ranges (name -> count); the summary's op_windows."""
    trace = json.load(open(path))
    events = [event for event in trace["traceEvents"] if event.get("ph") == "X"]
    ranges = [event for event in events if event.get("cat") in ("cpu_op", "user_annotation")
              and not event["name"].startswith(("ProfilerStep#", "Partial step"))]
    steps = []
    for step in (event for event in events if event["name"].startswith("ProfilerStep#")):
        end = step["ts"] + step["dur"]
        steps.append((step["name"], collections.Counter(
            event["name"] for event in ranges if step["ts"] <= event["ts"] and event["ts"] + event["dur"] <= end)))
    return steps, trace["tprof_summary"].get("op_windows")


def check(root, directory):
    shutil.copy(LOOP, os.path.join(root, "tmp", "train_loop.py"))
    loop = subprocess.Popen(["chroot", root, "python3", "/tmp/train_loop.py", "--trigger", "none",
                             "--steps", "100000000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(12)  # torch's import and the warmup steps
        plain_path, budget_path = os.path.join(directory, "plain.json"), os.path.join(directory, "budget.json")
        subprocess.run([TPROF, "attach", str(loop.pid), "-d", "3", "-o", plain_path, "--no-et", "-q", "--force"],
                       check=True)
        plain, _ = steps_of(plain_path)
        usual = collections.Counter(json.dumps(sorted(ranges.items())) for _, ranges in plain).most_common(1)[0][0]
        subprocess.run([TPROF, "attach", str(loop.pid), "--max-overhead", "20%", "-d", "10", "-o", budget_path,
                        "--no-et", "-q", "--force"], check=True)
    finally:
        loop.kill()
        loop.wait()
    steps, windows = steps_of(budget_path)
    equal = [json.dumps(sorted(ranges.items())) == usual for _, ranges in steps]
    print(f"{root}: {len(plain)} plain steps; --max-overhead 20%: {json.dumps(windows)}; "
          f"exact steps equal to the usual step: {sum(equal)} of {len(steps)}")
    usual_ranges = collections.Counter(dict(json.loads(usual)))
    for (name, ranges), same in zip(steps, equal):
        if not same:
            print(f"  {name}: missing {dict(usual_ranges - ranges)}, extra {dict(ranges - usual_ranges)}")


def main():
    if os.geteuid() != 0:
        raise SystemExit("run as root: tprof attaches uprobes, and the roots are entered with chroot")
    roots = sys.argv[1:] or ["/var/cache/tprof/trixie-torch", "/var/cache/tprof/sid-torch"]
    for root in roots:
        with tempfile.TemporaryDirectory() as directory:
            check(root, directory)


if __name__ == "__main__":
    main()
