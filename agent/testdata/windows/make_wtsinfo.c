/*
 * make_wtsinfo.c writes wtsinfo-session2.bin: a WTSINFOW as
 * WTSQuerySessionInformationW(WTSSessionInfo) answers it on 64-bit Windows,
 * laid out by the C compiler from the Windows SDK header (mingw-w64's
 * wtsapi32.h), not by the Go decoder it tests (decodeWTSInfo). Regenerate:
 *
 *   x86_64-w64-mingw32-gcc -c make_wtsinfo.c -o /tmp/wtsinfo.o
 *   x86_64-w64-mingw32-objcopy -O binary --only-section=.wtsinfo /tmp/wtsinfo.o wtsinfo-session2.bin
 *
 * The values are session 2 of rdsh-2022-ad.json: CONTOSO\alice, Active,
 * logged on 2026-12-01 08:02:11 UTC.
 */
#include <windows.h>
#include <wtsapi32.h>

__attribute__((section(".wtsinfo"), used))
static const WTSINFOW session2 = {
	.State = WTSActive,
	.SessionId = 2,
	.IncomingBytes = 1204331,
	.OutgoingBytes = 9811234,
	.IncomingFrames = 4410,
	.OutgoingFrames = 7302,
	.IncomingCompressedBytes = 0,
	.OutgoingCompressedBytes = 0,
	.WinStationName = L"RDP-Tcp#0",
	.Domain = L"CONTOSO",
	.UserName = L"alice",
	.ConnectTime = {.QuadPart = 134405857290000000LL},
	.DisconnectTime = {.QuadPart = 0},
	.LastInputTime = {.QuadPart = 134405900900000000LL},
	.LogonTime = {.QuadPart = 134405857310000000LL},
	.CurrentTime = {.QuadPart = 134405900950000000LL},
};
