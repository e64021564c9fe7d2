#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import math
import struct
import wave

rate, seconds, freq, amplitude = 8000, 1.5, 440.0, 0.6 * 32767
frames = b"".join(
    struct.pack("<h", round(amplitude * math.sin(2 * math.pi * freq * i / rate)))
    for i in range(int(rate * seconds))
)
with wave.open("/app/out/tone.wav", "wb") as w:
    w.setnchannels(1)
    w.setsampwidth(2)
    w.setframerate(rate)
    w.writeframes(frames)
PY
