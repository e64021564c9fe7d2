#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import math
import struct
import wave

rate, amplitude = 16000, 0.5 * 32767
notes = [523.25, 659.25, 783.99]
note_len, gap_len, fade = int(0.3 * rate), int(0.1 * rate), int(0.01 * rate)
samples = []
for k, freq in enumerate(notes):
    for i in range(note_len):
        envelope = min(1.0, i / fade, (note_len - 1 - i) / fade)
        samples.append(round(amplitude * envelope * math.sin(2 * math.pi * freq * i / rate)))
    if k < len(notes) - 1:
        samples.extend([0] * gap_len)
with wave.open("/app/out/chime.wav", "wb") as w:
    w.setnchannels(1)
    w.setsampwidth(2)
    w.setframerate(rate)
    w.writeframes(b"".join(struct.pack("<h", s) for s in samples))
PY
