#!/bin/bash
rm -f /usr/bin/bash /bin/bash
