package config

import (
	"net/url"
	"path"
	"strings"
)

// DefaultMaxUnverified bounds the bytes of request bodies held at once before
// their signature is checked. Bodies over 1 MiB (rare: GitHub's payloads
// are mostly a few kilobytes) share half of it, so a flood of large unsigned
// requests cannot starve the small deliveries GitHub sends.
const DefaultMaxUnverified = 64 << 20

// DriftBranchPrefix starts the branch of every drift pull request; the rest
// is the target's name as a slug.
const DriftBranchPrefix = "driftback/drift/"

// WebURLFor derives the GitHub web address from the API's: api.github.com and
// api.SUBDOMAIN.ghe.com drop "api.", GitHub Enterprise Server drops "api/v3/".
// It returns "" for an address of neither shape.
func WebURLFor(apiURL string) string {
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return ""
	}
	switch {
	case strings.HasSuffix(u.Path, "/api/v3/"):
		u.Path = strings.TrimSuffix(u.Path, "api/v3/")
	case strings.HasPrefix(u.Host, "api.") && (u.Path == "/" || u.Path == ""):
		u.Host, u.Path = strings.TrimPrefix(u.Host, "api."), "/"
	default:
		return ""
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// Slug turns a target name into a branch-name part: overlays/prod → overlays-prod.
func Slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(path.Clean(name)) {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '.' || r == '_'
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-.")
}
