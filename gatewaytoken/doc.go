// Package gatewaytoken is the access token that authorises one tunnel
// through the vdibroker gateway: the broker signs it when it answers a
// connect (the .rdp line gatewayaccesstoken:s:TOKEN), the client hands it
// to the gateway in the PAA cookie of MS-TSGU's tunnel create packet, and
// the gateway checks it with public keys only, needing no database.
//
// A token is four dot-separated ASCII fields:
//
//	v1.<key id>.<claims>.<signature>
//
// where claims is the base64url (no padding) of a JSON object (Claims) and
// signature the base64url of the Ed25519 signature of the text before the
// last dot. The key id names the public key in the gateway's KeySet (a
// JWKS document of OKP/Ed25519 keys), so keys rotate by publishing the new
// key beside the old one before signing with it.
package gatewaytoken
