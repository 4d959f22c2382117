#!/usr/bin/env bash
# The C sources are formatted with the committed .clang-format. Exit 77
# (skip) when clang-format is missing; Debian's package 'clang-format' has it.
set -euo pipefail
root=${IDPOOL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
command -v clang-format >/dev/null || { echo "SKIP: clang-format is not installed"; exit 77; }
cd "$root"
mapfile -t files < <(find src include test -name '*.[ch]' | sort)
clang-format --dry-run --Werror "${files[@]}"
echo "${#files[@]} files formatted"
