package livestate

import (
	"k8s.io/client-go/rest"
)

// Client rate limits for reading a cluster. client-go's own defaults (5
// requests a second, bursts of 10) suit a controller that reads one object at
// a time from a watch cache; a comparison that lists tens of kinds in many
// namespaces, or an informer start-up over them, waits on them for minutes
// while the apiserver sits idle. These match what Flux's controllers and
// kubectl use: the apiserver's API Priority and Fairness, not the client, is
// what protects a shared control plane.
const (
	DefaultQPS   = 50
	DefaultBurst = 300
)

// ClientLimits are the client-side rate limits of one cluster's clients.
type ClientLimits struct {
	// QPS is the sustained rate of requests; 0 means DefaultQPS. A negative
	// value turns client-side limiting off.
	QPS float32 `yaml:"qps" json:"qps"`
	// Burst is how many requests may go at once above QPS; 0 means DefaultBurst.
	Burst int `yaml:"burst" json:"burst"`
}

// Configure returns a copy of cfg with the limits set and driftback named as
// the user agent where cfg names none. A cfg that already carries limits
// (QPS, Burst or its own RateLimiter) keeps them: whoever set them chose.
func Configure(cfg *rest.Config, l ClientLimits) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.RateLimiter == nil {
		if c.QPS == 0 {
			c.QPS = l.QPS
			if c.QPS == 0 {
				c.QPS = DefaultQPS
			}
		}
		if c.Burst == 0 {
			c.Burst = l.Burst
			if c.Burst == 0 {
				c.Burst = DefaultBurst
			}
		}
	}
	if c.UserAgent == "" {
		c.UserAgent = "driftback"
	}
	if c.WarningHandler == nil && c.WarningHandlerWithContext == nil {
		// The apiserver's deprecation warnings ("v1 ComponentStatus is
		// deprecated") are about reads driftback makes, not about anything
		// its user can change: they are not printed. A caller that wants
		// them sets a handler first.
		c.WarningHandler = rest.NoWarnings{}
	}
	return c
}
