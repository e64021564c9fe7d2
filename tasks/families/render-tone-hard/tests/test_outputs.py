"""Checks for render-tone-hard: the WAV measured from its samples, nothing trusted."""

import os
import sys

import math
import wave

WAV = "/app/out/chime.wav"
RATE = 16000
FULL_SCALE = 32767


def samples():
    """The samples, counted from the data actually present (not the header's frame count)."""
    import io

    with wave.open(io.BytesIO(regular_file(WAV))) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, RATE), (
            f"{w.getnchannels()} channel(s), {8 * w.getsampwidth()}-bit, {w.getframerate()} Hz"
        )
        assert w.getcomptype() == "NONE", "not PCM"
        data = w.readframes(1 << 30)
    data = data[: len(data) // 2 * 2]
    return [int.from_bytes(data[i:i + 2], "little", signed=True) for i in range(0, len(data), 2)]


def power_at(xs, freq):
    """Goertzel: the share of the signal's power at `freq` (1.0 for a pure sine there)."""
    n = len(xs)
    if n == 0:
        return 0.0
    coeff = 2 * math.cos(2 * math.pi * freq / RATE)
    s1 = s2 = 0.0
    for x in xs:
        s1, s2 = x + coeff * s1 - s2, s1
    power = s1 * s1 + s2 * s2 - coeff * s1 * s2
    energy = sum(x * x for x in xs)
    return 2 * power / (n * energy) if energy else 0.0


def peak_frequency(xs, lo, hi, step=0.5):
    """The frequency in [lo, hi] with the most power, and its share."""
    best = max((power_at(xs, lo + i * step), lo + i * step) for i in range(int((hi - lo) / step) + 1))
    return best[1], best[0]


def crossings_frequency(xs):
    """The frequency from the count of sign changes (two per period)."""
    signs = [x > 0 for x in xs if x != 0]
    changes = sum(1 for a, b in zip(signs, signs[1:]) if a != b)
    return changes / 2 / (len(xs) / RATE)


def test_wav_is_a_regular_file():
    regular_file(WAV)


def test_format_is_16_bit_mono_pcm():
    samples()

NOTES = [523.25, 659.25, 783.99]
WINDOW = 160  # 10 ms


def segments(xs):
    """(start, end) sample ranges where 10 ms windows are louder than 5% of full scale."""
    loud = []
    for i in range(0, len(xs) - WINDOW + 1, WINDOW):
        w = xs[i:i + WINDOW]
        loud.append(math.sqrt(sum(x * x for x in w) / WINDOW) > 0.05 * FULL_SCALE)
    out = []
    for k, on in enumerate(loud):
        if on and (k == 0 or not loud[k - 1]):
            out.append([k * WINDOW, None])
        if on and (k == len(loud) - 1 or not loud[k + 1]):
            out[-1][1] = (k + 1) * WINDOW
    return [tuple(s) for s in out]


def note(k):
    xs = samples()
    found = segments(xs)
    assert len(found) == 3, f"{len(found)} sounding parts, not 3"
    start, end = found[k]
    margin = 2 * WINDOW  # away from the fades
    return xs[start + margin:end - margin]


def test_duration():
    n = len(samples())
    assert abs(n - 17600) <= 16, f"{n} samples: {n / RATE:.4f} s, not 1.1 s"


def test_three_notes():
    found = segments(samples())
    assert len(found) == 3, f"{len(found)} sounding parts at {[(a / RATE, b / RATE) for a, b in found]}"


def test_timing():
    found = segments(samples())
    assert len(found) == 3, f"{len(found)} sounding parts"
    expected = [(0.0, 0.3), (0.4, 0.7), (0.8, 1.1)]
    for (start, end), (want_start, want_end) in zip(found, expected):
        assert abs(start / RATE - want_start) <= 0.02 and abs(end / RATE - want_end) <= 0.02, (
            f"a note sounds from {start / RATE:.3f} s to {end / RATE:.3f} s, not {want_start}-{want_end} s"
        )


def test_gaps_are_silent():
    xs = samples()
    for lo, hi in [(0.31, 0.39), (0.71, 0.79)]:
        gap = xs[int(lo * RATE):int(hi * RATE)]
        assert gap and max(abs(x) for x in gap) <= 0.01 * FULL_SCALE, f"not silent between {lo} and {hi} s"


def test_first_note_pitch():
    check_pitch(0)


def test_second_note_pitch():
    check_pitch(1)


def test_third_note_pitch():
    check_pitch(2)


def check_pitch(k):
    xs = note(k)
    want = NOTES[k]
    f, share = peak_frequency(xs, want - 30, want + 30)
    assert abs(f - want) <= 3, f"note {k + 1} peaks at {f} Hz, not {want} Hz"
    assert share >= 0.8, f"only {share:.0%} of note {k + 1}'s power is at {f} Hz"
    z = crossings_frequency(xs)
    assert abs(z - want) <= 6, f"note {k + 1} is {z:.1f} Hz by zero crossings, not {want} Hz"


def test_amplitude():
    peak = max(abs(x) for x in samples()) / FULL_SCALE
    assert 0.3 <= peak <= 0.8, f"peak at {peak:.0%} of full scale"


# --- Reporting (generated: tasks/families/generate.py) ---------------------------------------
def run_checks(namespace):
    """Runs every `test_*` function of `namespace` in order: [(name, passed, message)]."""
    records = []
    for name, fn in list(namespace.items()):
        if not (name.startswith("test_") and callable(fn)):
            continue
        try:
            fn()
            records.append((name, True, ""))
        except AssertionError as exc:
            records.append((name, False, "AssertionError: " + (str(exc) or "assertion failed")))
        except Exception as exc:  # a crashing check is a failed check
            records.append((name, False, f"{type(exc).__name__}: {exc}"))
    return records


def report(records, label="test_outputs.py"):
    """Prints the named checks, writes ctrf.json and reward.json (1 only when all passed)."""
    import json
    import time

    now = int(time.time() * 1000)
    tests = []
    for name, passed, message in records:
        test = {"name": f"{label}::{name}", "status": "passed" if passed else "failed", "duration": 0}
        if message:
            test["message"] = message[:2000]
        tests.append(test)
    passed = sum(1 for _, ok, _ in records if ok)
    print("=" * 30 + " short test summary info " + "=" * 30)
    for test in tests:
        line = f"{test['status'].upper()} {test['name']}"
        if test.get("message"):
            line += " - " + test["message"].splitlines()[0]
        print(line)
    print(f"{passed} passed, {len(records) - passed} failed")
    ctrf = {
        "results": {
            "tool": {"name": "runner-families"},
            "summary": {
                "tests": len(records),
                "passed": passed,
                "failed": len(records) - passed,
                "pending": 0,
                "skipped": 0,
                "other": 0,
                "start": now,
                "stop": now,
            },
            "tests": tests,
        }
    }
    os.makedirs("/logs/verifier", exist_ok=True)
    with open("/logs/verifier/ctrf.json", "w") as out:
        json.dump(ctrf, out, indent=2)
    reward = 1.0 if records and passed == len(records) else 0.0
    with open("/logs/verifier/reward.json", "w") as out:
        json.dump({"reward": reward}, out)
    print("reward:", reward)
    sys.exit(0 if reward == 1.0 else 1)


def regular_file(path):
    """The bytes of `path`, refusing anything but a regular file (a symlink scores 0)."""
    import stat

    info = os.lstat(path)
    assert not stat.S_ISLNK(info.st_mode), f"{path} is a symlink"
    assert stat.S_ISREG(info.st_mode), f"{path} is not a regular file"
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read()


if __name__ == "__main__":
    report(run_checks(globals()))
