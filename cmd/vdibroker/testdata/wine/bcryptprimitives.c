/*
 * bcryptprimitives.dll for Wine 8, which lacks it: Go's runtime (1.22 and
 * later) takes its random numbers from ProcessPrng in bcryptprimitives.dll
 * and stops at start without it. This one forwards ProcessPrng to
 * advapi32's RtlGenRandom (SystemFunction036). TestAgentWine
 * (agent_wine_test.go) builds it into its Wine prefix's system32:
 *
 *   x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll \
 *     bcryptprimitives.c bcryptprimitives.def -ladvapi32
 *
 * Only for tests under Wine: Windows 10 and later have the real one.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	while (length > 0) {
		ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		length -= n;
	}
	return TRUE;
}
