#!/bin/bash
python3 -c "open(\"/app/hello.txt\", \"w\").write(\"Hello, world!\")"
