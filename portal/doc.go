// Package portal is the user portal at /portal/ (R-U1): an end user signs
// in (single sign-on through identity.Flow, where any identity the
// provider vouches for is a User, or a User token, R-U2), sees the
// desktops and apps of their feed (R-U5), opens one and gets its .rdp
// file, waiting on a page while its host starts (R-U4, R-A4), and logs
// off or disconnects their own sessions (R-U3). Pages are in English,
// German, Portuguese or Arabic (R-U6), from one catalogue (i18n.go).
//
// Like the console it holds no privileges of its own: every read and
// change is a call of the broker's API (Config.API, in-process) as the
// signed-in user, so the API authorizes, validates and audits the
// portal's calls as any client's. A single sign-on user's calls carry the
// identity the portal verified (vdibroker.WithVerified), a token user's
// their token. Sign-ins are web sessions of their own area (websession:
// rows in the database every replica reads), the cookie HttpOnly,
// SameSite=Lax (the provider's redirect back is a cross-site navigation)
// and Secure over TLS; every form carries the session's CSRF token; the
// pages follow webguard's headers and Content-Security-Policy (one
// script file, no inline script). A launch (launch.go) is the signed-in
// browser's alone, single-use and short-lived (R-U7).
package portal
