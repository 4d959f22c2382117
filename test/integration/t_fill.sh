#!/usr/bin/env bash
# placeholder
exit 77
