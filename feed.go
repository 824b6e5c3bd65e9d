package vdibroker

import (
	"context"
	"net/url"
	"strings"
)

// The feed (R-U5): what the signed-in user may open, one line per
// desktop, application and global entitlement, with what a client needs
// to show it (a friendly name, an icon) and to open it (the API call).
// The user portal lists it; scripts and thin clients read it at
// GET /api/v1/feed; the portal also serves it as Microsoft's Remote
// Desktop web feed (MS-TSWP).

// Feed resource kinds, MS-TSWP's Resource Type values.
const (
	FeedDesktop   = "Desktop"
	FeedRemoteApp = "RemoteApp"
)

// The default icons the portal serves per kind. An application's
// iconPath names a file on its session hosts, which the broker cannot
// read: every resource shows its kind's icon.
const (
	IconDesktopPath   = "/portal/icons/desktop.svg"
	IconRemoteAppPath = "/portal/icons/remoteapp.svg"
)

// FeedResource is one resource of a user's feed.
type FeedResource struct {
	// ID names the resource, stable from one read to the next:
	// "desktop:<pool>", "app:<group>/<application>" or
	// "global:<entitlement>" (ParseResourceID).
	ID string `json:"id"`
	// Kind is FeedDesktop or FeedRemoteApp.
	Kind         string `json:"kind"`
	FriendlyName string `json:"friendlyName"`
	// HostPool (with ApplicationGroup, and Application for a RemoteApp)
	// for a pool's resource; GlobalEntitlement for a global one.
	HostPool          string `json:"hostPool,omitempty"`
	ApplicationGroup  string `json:"applicationGroup,omitempty"`
	Application       string `json:"application,omitempty"`
	GlobalEntitlement string `json:"globalEntitlement,omitempty"`
	// MemberPools are a global entitlement's member pools in this pod,
	// by name: a session of the user's in one of them may have been
	// opened through it, and is named after it (R-U3).
	MemberPools []string `json:"memberPools,omitempty"`
	// ReconnectsHere says of a global entitlement that its global
	// connect at this pod looks for the user's sessions in this pod:
	// this pod is in its scope from here, for her (R-G1). Not so (a
	// WithinSite scope from her home site elsewhere), a session of hers
	// in MemberPools is not reached through it: its connect makes a new
	// session in its scope instead (the user portal offers no Reconnect
	// through it, R-U1).
	ReconnectsHere bool `json:"reconnectsHere,omitempty"`
	// IconURL is the kind's default icon (IconDesktopPath,
	// IconRemoteAppPath), a path of this broker.
	IconURL string `json:"iconUrl"`
	// ConnectURL is the API call that opens it (POST, with ConnectBody
	// as its JSON body; ?wait= may be added, R-U4, except to a global
	// entitlement's).
	ConnectURL  string            `json:"connectUrl"`
	ConnectBody map[string]string `json:"connectBody"`
	// Unavailable, when set, says that ConnectURL cannot open it now, and
	// why: the code of the error its connect answers. Absent (the
	// resource can be opened, as far as this pod can tell) when empty, so
	// a client that does not know it, or a feed from a broker that does
	// not send it, offers every resource. It is ERemoteAppUnsupported for
	// a RemoteApp whose connect is refused because no host it may be
	// placed on can run RemoteApps (R-E12): its pool has hosts and they
	// all say No; for a global entitlement, every member pool its connect
	// here tries is this pod's and says so. A pool without hosts, or with
	// one that can or did not say (Unknown), is not marked, nor is a
	// global entitlement with a member pool of another pod in its scope.
	// A connect made anyway is refused as before.
	Unavailable string `json:"unavailable,omitempty"`
}

// Feed is GET /api/v1/feed: the caller's resources, desktops first, each
// kind by friendly name.
type Feed struct {
	User      string         `json:"user"`
	Resources []FeedResource `json:"resources"`
}

// Resource ID kinds (FeedResource.ID).
const (
	resDesktop = "desktop"
	resApp     = "app"
	resGlobal  = "global"
)

// DesktopID, AppID and GlobalID are the ids of a pool's desktop, an
// application of a RemoteApp group and a global entitlement.
func DesktopID(pool string) string       { return resDesktop + ":" + pool }
func AppID(group, app string) string     { return resApp + ":" + group + "/" + app }
func GlobalID(entitlement string) string { return resGlobal + ":" + entitlement }

// ParseResourceID reads a FeedResource.ID back into the resource it
// names (Resource.ApplicationGroup and the application for "app:"), each
// name checked as the API checks it. Anything else is InvalidArgument on
// field. It is a pure function of its input (fuzzed): the portal's forms
// and the web feed's paths carry these ids.
func ParseResourceID(field, id string) (r Resource, app string, err error) {
	bad := func() (Resource, string, error) {
		return Resource{}, "", FieldError(field, "must be desktop:<host pool>, app:<application group>/<application> or global:<global entitlement>, got %q", Cut(id, 64))
	}
	kind, rest, ok := strings.Cut(id, ":")
	if !ok || len(id) > 256 {
		return bad()
	}
	switch kind {
	case resDesktop:
		if ValidateName(field, rest, MinPoolNameLen, MaxPoolNameLen) != nil {
			return bad()
		}
		return Resource{HostPool: rest}, "", nil
	case resApp:
		group, name, ok := strings.Cut(rest, "/")
		if !ok || ValidateName(field, group, MinAppGroupNameLen, MaxAppGroupNameLen) != nil ||
			ValidateName(field, name, MinAppNameLen, MaxAppNameLen) != nil {
			return bad()
		}
		return Resource{ApplicationGroup: group}, name, nil
	case resGlobal:
		if ValidateName(field, rest, 1, MaxPoolNameLen) != nil {
			return bad()
		}
		return Resource{GlobalEntitlement: rest}, "", nil
	}
	return bad()
}

// ConnectPath is the API path that opens r (POST).
func ConnectPath(r Resource) string {
	switch {
	case r.GlobalEntitlement != "":
		return "/api/v1/globalentitlements/" + url.PathEscape(r.GlobalEntitlement) + "/connect"
	case r.ApplicationGroup != "":
		return "/api/v1/applicationgroups/" + url.PathEscape(r.ApplicationGroup) + "/connect"
	}
	return "/api/v1/hostpools/" + url.PathEscape(r.HostPool) + "/connect"
}

// FeedService answers a caller's feed.
type FeedService interface {
	// Feed lists what the calling principal may open (R-U5): its
	// entitlements (R-E10) as its own identity, local and global, the
	// applications whose showInPortal is set, with friendly names,
	// default icons and connect calls. A principal scoped to host pools
	// sees its pools' resources and no global one.
	Feed(ctx context.Context) (*Feed, error)
}
