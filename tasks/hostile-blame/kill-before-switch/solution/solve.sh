#!/bin/bash
kill -TERM 1
sleep 2
kill -KILL 1
sleep 5
