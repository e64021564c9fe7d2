#!/bin/bash
truncate -s 4G /logs/artifacts/huge.bin
echo small > /logs/artifacts/small.txt
