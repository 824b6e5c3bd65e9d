#!/usr/bin/env python3
"""Writes utmp.bin: glibc struct utmp records (x86_64 layout, 384 bytes,
little-endian) as a console, ssh and xrdp host would have them. Independent
of the Go parser on purpose: run it with python3 to regenerate."""
import struct

def rec(typ, pid, line, id_, user, host, session=0, sec=0, usec=0):
    return struct.pack("<hxxi32s4s32s256shhiii16s20s",
                       typ, pid, line.encode(), id_.encode(), user.encode(),
                       host.encode(), 0, 0, session, sec, usec, b"", b"")

records = [
    rec(2, 0, "~", "~~", "reboot", "6.1.0-18-amd64", sec=1764400000),  # BOOT_TIME
    rec(1, 53, "~", "~~", "runlevel", "6.1.0-18-amd64", sec=1764400001),  # RUN_LVL
    rec(6, 610, "tty1", "tty1", "LOGIN", "", sec=1764400005),  # LOGIN_PROCESS (getty)
    rec(7, 1234, "pts/0", "ts/0", "alice", "10.0.0.5", session=1234, sec=1764401000, usec=250000),
    rec(7, 2345, ":10", ":10", "bob", "10.0.0.6", session=2345, sec=1764402000),  # xrdp
    rec(7, 3456, "tty2", "tty2", "carol", "", session=3456, sec=1764403000),  # console
    rec(8, 4567, "pts/1", "ts/1", "", "", sec=1764404000),  # DEAD_PROCESS: logged out
    rec(7, 9999, "pts/2", "ts/2", "stale", "10.0.0.7", sec=1764300000),  # crashed: pid gone
]
for r in records:
    assert len(r) == 384, len(r)
with open("utmp.bin", "wb") as f:
    f.write(b"".join(records))
