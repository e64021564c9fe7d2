#!/bin/bash
if python3 -c "import sys; sys.exit(open(\"/app/hello.txt\").read() != \"Hello, world!\")"; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
