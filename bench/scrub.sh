#!/usr/bin/env bash
# Benchmark of `runner scrub`: generates a 1 GiB job directory of mixed text, JSON and terminal
# logs holding 20 secrets (raw, JSON, masked, base64, split by ANSI codes), scrubs it with the
# release binary, checks the result, and prints MB/s (input bytes / wall time, including the
# verification pass).
#
# Usage: bench/scrub.sh [SIZE_MIB] (default 1024). Needs python3. Set SCRUB_BENCH_DIR=DIR to keep
# the generated data in DIR and reuse it on the next run.
set -euo pipefail

size_mib="${1:-1024}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
if [[ -n "${SCRUB_BENCH_DIR:-}" ]]; then
  work="$SCRUB_BENCH_DIR"
  mkdir -p "$work"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/scrub-bench.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi
rm -rf "$work/public"

echo "building runner (release)…" >&2
(cd "$repo" && cargo build --release -q -p runner --bin runner)
runner="$target/release/runner"

if [[ ! -d "$work/job" ]]; then
echo "generating ${size_mib} MiB job dir in $work…" >&2
python3 - "$work" "$size_mib" <<'PY'
import base64, json, os, random, sys

root, size_mib = sys.argv[1], int(sys.argv[2])
rng = random.Random(20260101)
alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
def rand(n, alphabet=alnum):
    return "".join(rng.choice(alphabet) for _ in range(n))

# 20 synthetic secrets of assorted shapes, written to a .env file for --secrets-from.
shapes = [lambda: "sk-ant-api03-" + rand(93, alnum + "-_") + "AA",
          lambda: "ghp_" + rand(36),
          lambda: "sk-or-v1-" + rand(64, "0123456789abcdef"),
          lambda: "pw-" + rand(21)]
secrets = [(f"SECRET_{i:02d}_KEY", shapes[i % 4]()) for i in range(20)]
with open(os.path.join(root, "secrets.env"), "w") as f:
    for name, value in secrets:
        f.write(f"{name}={value}\n")

words = ("the agent ran pytest and the build passed while reading files from the repository "
         "cargo test compile error warning info debug step tool call result observation").split()
def sentence():
    return " ".join(rng.choice(words) for _ in range(rng.randint(6, 18)))

# Blocks of realistic content; files are assembled from shuffled blocks to stay fast to generate.
log_lines = [f"2026-01-01T00:{i % 60:02d}:{i % 60:02d}Z INFO {sentence()}\n" for i in range(4000)]
ansi_lines = [f"\x1b[3{i % 8}m{sentence()}\x1b[0m\r\n" for i in range(4000)]
json_steps = [json.dumps({"step_id": i, "source": "agent", "message": sentence(),
                          "tool_calls": [{"name": "bash", "arguments": {"cmd": sentence()}}],
                          "metrics": {"prompt_tokens": rng.randint(1, 9999)}}) for i in range(2000)]
def block(lines, target_bytes):
    out, n = [], 0
    while n < target_bytes:
        line = rng.choice(lines)
        out.append(line)
        n += len(line)
    return "".join(out)

def plant(value):
    form = rng.randrange(5)
    if form == 0: return f" key={value} "
    if form == 1: return f" {value[:4]}****{value[-3:]} "
    if form == 2: return " auth " + base64.b64encode(("u:" + value).encode()).decode() + " "
    if form == 3: return " " + value[:10] + "\x1b[0m" + value[10:] + " "
    return " " + json.dumps(value) + " "

total = size_mib << 20
trials = max(1, total // (16 << 20))
per_trial = total // trials
planted = 0
for t in range(trials):
    d = os.path.join(root, "job", f"task-{t:03d}__1", "agent")
    os.makedirs(d, exist_ok=True)
    parts = {"trace.log": (log_lines, 0.375), "terminal.log": (ansi_lines, 0.3125),
             "trajectory.json": (json_steps, 0.3125)}
    for name, (lines, share) in parts.items():
        text = block(lines, int(per_trial * share))
        if name == "trajectory.json":
            text = "[\n" + text.replace("}{", "},\n{").replace("}\n{", "},\n{") + "\n]\n"
        # Plant a few secrets per trial, spread through the file.
        pieces = [text]
        if (t + len(name)) % 3 == 0:
            cut = rng.randrange(len(text))
            value = secrets[planted % 20][1]
            planted += 1
            pieces = [text[:cut], plant(value), text[cut:]]
        with open(os.path.join(d, name), "w") as f:
            f.write("".join(pieces))
    name, value = secrets[t % 20]
    with open(os.path.join(root, "job", f"task-{t:03d}__1", "config.json"), "w") as f:
        json.dump({"agent": {"env": {name: value[:4] + "****" + value[-3:]}}, "trial": t}, f, indent=4)
print(f"planted {planted} occurrences in {trials} trials", file=sys.stderr)
PY
fi

bytes=$(du -sb "$work/job" | cut -f1)
echo "scrubbing $((bytes >> 20)) MiB on $(nproc) cores…" >&2
start=$(date +%s.%N)
"$runner" scrub --in "$work/job" --out "$work/public" --secrets-from "$work/secrets.env"
end=$(date +%s.%N)
if grep -rqF -f <(cut -d= -f2- "$work/secrets.env") "$work/public"; then
  echo "FAIL: a secret value survived" >&2
  exit 1
fi
python3 - "$bytes" "$start" "$end" <<'PY'
import sys
size, start, end = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
secs = end - start
print(f"scrub: {size / 1e6:.0f} MB in {secs:.2f} s = {size / 1e6 / secs:.0f} MB/s")
PY
