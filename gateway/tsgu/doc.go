// Package tsgu is the wire format of the HTTP transport of MS-TSGU, the
// Terminal Services Gateway Server Protocol (sections 2.2.5.3 and 2.2.10):
// one struct per packet, each marshalled and unmarshalled here and nowhere
// else. Every decoder is a pure function of the packet's bytes that checks
// each length before it trusts it; a Framer reads and writes whole packets
// on a stream (the OUT and IN channels or a WebSocket) with a bound on their
// size. The server's state machine, with the states named as in the
// specification, is ServerState.
//
// All integers are little-endian; strings (HTTP_UNICODE_STRING) are a
// 16-bit byte count followed by UTF-16LE, which clients often end with a
// NUL that the decoder drops.
package tsgu
