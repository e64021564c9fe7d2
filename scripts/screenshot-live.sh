#!/usr/bin/env bash
# Makes docs/img/runner-live.png, the README's picture of the live view: runs the example
# dataset with the oracle in a detached tmux pane of a fixed size, captures the pane with its
# colours once some trials have finished while others run, renders it to HTML and takes a
# headless Chromium screenshot of that page.
#
# Needs: tmux, python3, chromium (Debian's package; or RUNNER_CHROMIUM), the Docker engine and
# the examples' base image (scripts/base-image.sh). Usage: bash scripts/screenshot-live.sh [OUT]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/docs/img/runner-live.png}
cols=112
rows=22
chromium=${RUNNER_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$chromium" ] || { echo "chromium is needed (apt-get install chromium, or set RUNNER_CHROMIUM)" >&2; exit 1; }
command -v tmux >/dev/null || { echo "tmux is needed" >&2; exit 1; }

cd "$root"
cargo build -q -p runner --bin runner
bash scripts/base-image.sh >/dev/null
work=$(mktemp -d)
session="runner-live-shot-$$"
cleanup() {
    tmux kill-session -t "$session" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The oracle on the examples, 3 trials each, 4 at once: slow-oracle's trials run to their
# timeout, so there is always something running while others finish.
tmux new-session -d -s "$session" -x "$cols" -y "$rows" \
    "env TERM=xterm-256color '$root/target/debug/runner' run --agent oracle -k 3 -n 4 \
        --path '$root/tasks/examples' --jobs-dir '$work/jobs' --job-name live --color always; sleep 600"

# Wait until at least 5 trials are done and 2 are still running (or 5 minutes pass).
result="$work/jobs/live/result.json"
for _ in $(seq 1 600); do
    if [ -f "$result" ] && python3 - "$result" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["stats"]
sys.exit(0 if s["n_completed_trials"] >= 5 and s["n_running_trials"] >= 2 else 1)
EOF
    then
        break
    fi
    sleep 0.5
done
sleep 1.5  # let a few redraws pass, so elapsed times and the ETA have moved
tmux capture-pane -e -p -t "$session" > "$work/pane.ansi"
# Stop the job as a user would (Ctrl-C: trials tear down, records are written) and wait for
# the runner to finish its records before the temporary jobs dir goes.
tmux send-keys -t "$session" C-c
for _ in $(seq 1 240); do
    python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("finished_at") else 1)' "$result" && break
    sleep 0.5
done

# ANSI (SGR colours and bold/dim) to one <pre> of spans.
python3 - "$work/pane.ansi" "$work/pane.html" "$cols" <<'EOF'
import html, re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read().rstrip("\n")
cols = int(sys.argv[3])
palette = {30: "#1e1e1e", 31: "#f14c4c", 32: "#23d18b", 33: "#f5f543", 34: "#3b8eea",
           35: "#d670d6", 36: "#29b8db", 37: "#e5e5e5"}
state = {"fg": None, "bold": False, "dim": False}
out = []
def style():
    css = []
    if state["fg"]: css.append("color:" + state["fg"])
    if state["bold"]: css.append("font-weight:bold")
    if state["dim"]: css.append("opacity:0.6")
    return ";".join(css)
for part in re.split(r"(\x1b\[[0-9;]*m)", text):
    m = re.fullmatch(r"\x1b\[([0-9;]*)m", part)
    if m:
        for code in [int(c) if c else 0 for c in m.group(1).split(";")]:
            if code == 0: state.update(fg=None, bold=False, dim=False)
            elif code == 1: state["bold"] = True
            elif code == 2: state["dim"] = True
            elif code == 22: state.update(bold=False, dim=False)
            elif code == 39: state["fg"] = None
            elif code in palette: state["fg"] = palette[code]
            elif 90 <= code <= 97: state["fg"] = palette[code - 60]
        continue
    part = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", part)
    if part:
        out.append('<span style="%s">%s</span>' % (style(), html.escape(part)))
page = """<!doctype html><meta charset="utf-8"><style>
body { margin: 0; background: #1e1e1e; }
pre { margin: 0; padding: 14px 18px; color: #e5e5e5; font: 14px/1.35 'DejaVu Sans Mono', monospace;
      width: %dch; }
</style><pre>%s</pre>""" % (cols, "".join(out))
open(sys.argv[2], "w", encoding="utf-8").write(page)
EOF

lines=$(wc -l < "$work/pane.ansi")
height=$(( (lines + 1) * 19 + 30 ))
width=$(( cols * 85 / 10 + 40 ))
mkdir -p "$(dirname "$out")"
"$chromium" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$work/profile" --window-size="$width,$height" \
    --screenshot="$out" "file://$work/pane.html" 2>/dev/null
echo "wrote $out (${width}x${height}, $lines lines captured)"
