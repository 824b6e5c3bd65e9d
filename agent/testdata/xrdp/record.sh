#!/bin/sh
# record.sh DIR USER... — copies what the xrdp sessions provider reads of
# /proc into DIR/proc: for xrdp-sesman, xrdp and their descendants, the
# processes of the named users, and any X server (a decoy when it is not
# sesman's): stat, status, cmdline, the fd links and net/unix; environ only
# for the named users' processes (root's environment is never recorded).
# Run as root on a host with xrdp sessions (docs/agent.md).
set -eu
dir=$1; shift
mkdir -p "$dir/proc"
uids=""
for u in "$@"; do uids="$uids $(id -u "$u")"; done
want() { # pid
	comm=$(cat /proc/$1/comm 2>/dev/null) || return 1
	case $comm in xrdp*|Xorg|Xvfb) return 0 ;; esac
	uid=$(awk '/^Uid:/ {print $2}' /proc/$1/status 2>/dev/null) || return 1
	for u in $uids; do [ "$uid" = "$u" ] && return 0; done
	return 1
}
for p in /proc/[0-9]*; do
	pid=${p#/proc/}
	want "$pid" || continue
	d=$dir/proc/$pid
	mkdir -p "$d/fd"
	cat "$p/stat" > "$d/stat"
	grep -E '^(Name|PPid|Uid|Gid):' "$p/status" > "$d/status"
	cat "$p/cmdline" > "$d/cmdline"
	uid=$(awk '/^Uid:/ {print $2}' "$p/status")
	if [ "$uid" != 0 ]; then cat "$p/environ" > "$d/environ"; fi
	for f in "$p"/fd/*; do
		[ -e "$f" ] || [ -L "$f" ] || continue
		ln -s "$(readlink "$f")" "$d/fd/${f##*/}"
	done
	mkdir -p "$d/net"
	cat "$p/net/unix" > "$d/net/unix"
done
grep '^btime' /proc/stat > "$dir/proc/stat"
