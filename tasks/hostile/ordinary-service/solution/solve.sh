#!/bin/bash
echo served > /app/index.txt
cd /app && nohup python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &
for _ in $(seq 50); do python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8765/index.txt")' 2>/dev/null && exit 0; sleep .1; done
exit 1
