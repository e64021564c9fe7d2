#!/bin/bash
# Past the 64 MB limit, then gone before the watch's next look (every 2 s).
dd if=/dev/zero of=/app/fill.bin bs=1M count=160 status=none
