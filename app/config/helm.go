package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Helm says where Helm charts that are not in a target's repository may
// be fetched from, and how much a fetch may take. A chart is fetched only
// from a repository the default branch already names (a Flux
// HelmRepository or OCIRepository, an Argo CD Application's repoURL, a
// chart's dependency), one the cluster holds, or one listed here.
type Helm struct {
	// Repositories are trusted chart repositories, each with everything
	// under it: https://charts.example.com or oci://ghcr.io/example-org.
	Repositories []string `yaml:"repositories"`
	// PrivateHosts may resolve to loopback, private or link-local
	// addresses ("host" or "host:port"); no other host's chart is fetched
	// from such an address.
	PrivateHosts []string `yaml:"privateHosts"`
	// MaxBytes bounds one download: an index, a manifest or a chart
	// archive (default 64 MiB).
	MaxBytes int64 `yaml:"maxBytes"`
	// FetchTimeout bounds fetching one chart (default 1m).
	FetchTimeout time.Duration `yaml:"fetchTimeout"`
	// CacheBytes bounds the fetched charts kept in memory, by digest
	// (default 256 MiB).
	CacheBytes int64 `yaml:"cacheBytes"`
}

// validate checks the repositories are chart repository URLs.
func (h Helm) validate() []string {
	var errs []string
	for _, r := range h.Repositories {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "oci") {
			errs = append(errs, fmt.Sprintf("helm.repositories: %q is not an https://, http:// or oci:// URL", r))
		}
	}
	for _, h := range h.PrivateHosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			errs = append(errs, fmt.Sprintf("helm.privateHosts: %q is not a host or host:port", h))
		}
	}
	return errs
}
