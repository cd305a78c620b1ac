#!/usr/bin/env bash
# Install the Debian packages of the single-node SLURM cluster (munge, slurmctld, slurmd, slurmdbd, MariaDB for
# `sacct`), PostgreSQL 15 (Optuna's shared storage) and Chromium with a font (the report's check in a real
# headless browser, driven by Playwright: tests/analysis/report/test_report_screen.py). Idempotent: installs only
# what is missing, so a warm machine pays a dpkg query instead of an `apt-get update`. Needs root (Debian 12
# bookworm).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server postgresql-15 chromium fonts-dejavu-core)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
apt-get update -qq
# No recommends: the minimal set is enough and avoids ~40 unrelated *-dev plugin packages.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
