// Package charts fetches Helm charts for rendering, from the chart
// repositories an operator trusts: HTTP repositories (index.yaml) and OCI
// registries. Every fetch is bounded in bytes and time, follows redirects
// only on the same host, reaches no loopback, private or link-local
// address unless app.yml allows the host, and is cached by digest. What
// is trusted is Trust's to say; this package fetches what it is asked.
package charts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"

	"github.com/driftback/driftback/internal/lru"
	"github.com/driftback/driftback/render/helm"
)

// Options bound a Fetcher.
type Options struct {
	// PrivateHosts may resolve to loopback, private or link-local
	// addresses ("host" or "host:port").
	PrivateHosts []string
	// MaxBytes bounds one download: an index, a manifest or a chart archive.
	MaxBytes int64
	// Timeout bounds one chart's fetch, its index and tags included.
	Timeout time.Duration
	// CacheBytes bounds the charts kept in memory, by their files' size.
	CacheBytes int64
	// IndexTTL is how long a repository's index is used before it is read
	// again.
	IndexTTL time.Duration
	// Index parses one chart's versions out of a repository's index.yaml
	// (render.Renderer.ChartIndex, in a render child); nil parses indexes
	// of at most 1 MiB in this process and refuses larger ones.
	Index func(ctx context.Context, index []byte, chart string) ([]helm.IndexEntry, error)
}

// Defaults of Options.
const (
	DefaultMaxBytes   = 64 << 20
	DefaultTimeout    = time.Minute
	DefaultCacheBytes = 256 << 20
	DefaultIndexTTL   = time.Minute
	maxRedirects      = 5
)

// Auth is the basic credentials a repository's secretRef gives.
type Auth struct{ Username, Password string }

// Source is a chart to fetch.
type Source struct {
	// URL is the repository: https://… (an HTTP repository with an
	// index.yaml) or oci://host/path (a registry; the chart is
	// URL/Chart, or URL itself when Chart is empty).
	URL   string
	Chart string
	// Version is an exact version or a semver range, resolved as
	// source-controller does; "" and "*" are the latest stable version.
	// For an OCI source, Digest pins it instead.
	Version string
	Digest  string
	Auth    *Auth
}

// Chart is a fetched chart.
type Chart struct {
	Name, Version string
	// Digest identifies the archive (sha256:…).
	Digest string
	// Files are the chart's files by path from its root.
	Files map[string][]byte
}

// Fetcher fetches charts. It is safe for concurrent use.
type Fetcher struct {
	o      Options
	client *http.Client

	charts *lru.Cache[*Chart]

	mu      sync.Mutex
	indexes map[string]cachedIndex
}

// New is a Fetcher bounded by o (zero fields take their defaults).
func New(o Options) *Fetcher {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.IndexTTL <= 0 {
		o.IndexTTL = DefaultIndexTTL
	}
	f := &Fetcher{o: o, charts: lru.New[*Chart](o.CacheBytes), indexes: map[string]cachedIndex{}}
	transport := &http.Transport{
		// No proxy: the address checked is the address dialed.
		Proxy:                 nil,
		DialContext:           f.dial,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	f.client = &http.Client{Transport: transport, CheckRedirect: sameHostRedirects}
	return f
}

// Fetch fetches src's chart.
func (f *Fetcher) Fetch(ctx context.Context, src Source) (*Chart, error) {
	ctx, cancel := context.WithTimeout(ctx, f.o.Timeout)
	defer cancel()
	u, err := url.Parse(src.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("repository URL %q is not a URL", src.URL)
	}
	var c *Chart
	switch u.Scheme {
	case "http", "https":
		c, err = f.fetchHTTP(ctx, u, src)
	case "oci":
		c, err = f.fetchOCI(ctx, u, src)
	default:
		return nil, fmt.Errorf("repository URL %q: only https://, http:// and oci:// repositories are fetched", src.URL)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("fetching chart %s from %s took longer than %s", src.Chart, src.URL, f.o.Timeout)
	}
	return c, err
}

// cachedChart is the chart cached under key, marked recently used.
func (f *Fetcher) cachedChart(key string) *Chart {
	c, _ := f.charts.Get(key)
	return c
}

// keep caches c under key, evicting the least recently used charts past
// the cache's bound. A chart larger than the whole bound is not kept.
func (f *Fetcher) keep(key string, c *Chart) {
	var size int64
	for n, b := range c.Files {
		size += int64(len(n) + len(b))
	}
	f.charts.Add(key, c, size)
}

// load reads a chart archive: at most the bytes a chart may have
// decompressed, its paths from the chart's root.
func load(b []byte) (map[string][]byte, error) {
	buffered, err := archive.LoadArchiveFiles(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("chart archive: %w", err)
	}
	files := make(map[string][]byte, len(buffered))
	for _, bf := range buffered {
		files[bf.Name] = bf.Data
	}
	return files, nil
}

// accessKey names a repository as one caller reaches it: its whole
// address (credentials or a token in it included) and the credentials it
// gives. Indexes and charts are cached under it.
func accessKey(repo string, auth *Auth) string {
	h := sha256.New()
	h.Write([]byte(repo))
	if auth != nil {
		h.Write([]byte{0})
		h.Write([]byte(auth.Username))
		h.Write([]byte{0})
		h.Write([]byte(auth.Password))
	}
	return fmt.Sprintf("%x/", h.Sum(nil))
}

// boundedTransport holds every response body to max bytes while it is
// read: a registry's tag list or manifest cannot fill the memory.
type boundedTransport struct {
	rt  http.RoundTripper
	max int64
}

func (b *boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > b.max {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: the response is %d bytes, more than the %d a chart download may be", redacted(r.URL), resp.ContentLength, b.max)
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: b.max, what: redacted(r.URL), max: b.max}
	return resp, nil
}

// boundedBody fails a read past its bound.
type boundedBody struct {
	io.ReadCloser
	left, max int64
	what      string
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("%s is larger than %d bytes, the most a chart download may be", b.what, b.max)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, fmt.Errorf("%s is larger than %d bytes, the most a chart download may be", b.what, b.max)
	}
	return n, err
}

// digestOf is b's sha256 digest, as OCI and Helm indexes write it.
func digestOf(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

// get reads u, at most MaxBytes, with auth when it is for the
// repository's own host.
func (f *Fetcher) get(ctx context.Context, u *url.URL, auth *Auth, authHost string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "driftback")
	if auth != nil && u.Host == authHost {
		req.SetBasicAuth(auth.Username, auth.Password)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", redacted(u), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", redacted(u), resp.Status)
	}
	return f.readBounded(resp.Body, redacted(u))
}

// readBounded reads r, refusing more than MaxBytes.
func (f *Fetcher) readBounded(r io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, f.o.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if int64(len(b)) > f.o.MaxBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes, the most a chart download may be", what, f.o.MaxBytes)
	}
	return b, nil
}

// sameHostRedirects follows at most a few redirects, each to the host
// the request was for, never from https to http.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	first := via[0]
	switch {
	case len(via) > maxRedirects:
		return fmt.Errorf("more than %d redirects", maxRedirects)
	case req.URL.Host != first.URL.Host:
		return fmt.Errorf("redirected to another host, %s", req.URL.Host)
	case first.URL.Scheme == "https" && req.URL.Scheme != "https":
		return fmt.Errorf("redirected from https to %s", req.URL.Scheme)
	}
	return nil
}

// dial connects to addr unless it resolves to an address chart fetches
// may not reach: loopback, private, link-local, unspecified or multicast,
// for a host app.yml does not allow. The address checked is the one
// connected to, so a name that resolves differently the second time
// gains nothing.
func (f *Fetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	allowed := f.privateAllowed(host, addr)
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ipStr, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(ipStr)
		if ip == nil {
			return fmt.Errorf("%s is not an IP address", ipStr)
		}
		if !allowed && internal(ip) {
			return &PrivateAddressError{Host: host, IP: ip.String()}
		}
		return nil
	}}
	return d.DialContext(ctx, network, addr)
}

// PrivateAddressError is a fetch refused because its host resolves to an
// address inside the network.
type PrivateAddressError struct{ Host, IP string }

func (e *PrivateAddressError) Error() string {
	return fmt.Sprintf("%s resolves to %s, an address inside the network, which charts are not fetched from unless app.yml's helm.privateHosts lists the host", e.Host, e.IP)
}

// privateAllowed says app.yml lets host (addr with its port) reach
// private addresses.
func (f *Fetcher) privateAllowed(host, addr string) bool {
	for _, h := range f.o.PrivateHosts {
		if strings.EqualFold(h, host) || strings.EqualFold(h, addr) {
			return true
		}
	}
	return false
}

// internal says ip is inside the network or the machine, or is an
// address that may lead there: one that embeds an IPv4 address a
// translator or tunnel reaches (NAT64, 6to4, Teredo, IPv4-compatible),
// or one no public host has.
func internal(ip net.IP) bool {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return true
	}
	a = a.Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsUnspecified() || a.IsMulticast() {
		return true
	}
	for _, p := range specialRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// specialRanges are the ranges beyond Go's own tests that no chart
// repository is fetched from (IANA's special-purpose registries).
var specialRanges = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // this network
		"100.64.0.0/10",   // carrier-grade NAT (RFC 6598)
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"240.0.0.0/4",     // reserved, and the broadcast address
		"::/96",           // IPv4-compatible
		"64:ff9b::/96",    // NAT64
		"64:ff9b:1::/48",  // local NAT64
		"100::/64",        // discard
		"2001::/32",       // Teredo
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4
		"fec0::/10",       // site-local
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// redacted is u without credentials or query, for messages.
func redacted(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// unwrapURLError drops url.Error's repetition of the method and URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
