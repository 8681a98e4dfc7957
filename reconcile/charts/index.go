package charts

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/driftback/driftback/render/helm"
)

// indexEntry is one version of a chart in a repository's index.
type indexEntry = helm.IndexEntry

type cachedIndex struct {
	at      time.Time
	entries []indexEntry
}

// inProcessIndexBytes is the largest index parsed in this process when
// Options.Index is not set: parsing YAML takes tens of times its size.
const inProcessIndexBytes = 1 << 20

// fetchHTTP fetches a chart from an HTTP repository: its index, the
// version the range resolves to, then the archive the index names, which
// must match the index's digest when it gives one.
func (f *Fetcher) fetchHTTP(ctx context.Context, repo *url.URL, src Source) (*Chart, error) {
	entries, err := f.index(ctx, repo, src.Auth, src.Chart)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("repository %s has no chart %q", redacted(repo), src.Chart)
	}
	versions := make([]string, len(entries))
	for i, e := range entries {
		versions[i] = e.Version
	}
	v, err := Resolve(versions, src.Version)
	if err != nil {
		return nil, fmt.Errorf("chart %s in %s: %w", src.Chart, redacted(repo), err)
	}
	var entry indexEntry
	for _, e := range entries {
		if e.Version == v {
			entry = e
			break
		}
	}
	if len(entry.URLs) == 0 {
		return nil, fmt.Errorf("chart %s %s in %s has no URL", src.Chart, v, redacted(repo))
	}
	// A chart is served from the cache only by the digest this caller's
	// own index names, under the repository and credentials it reached
	// that index with: never to a caller without them, nor to another
	// repository's index that names the same digest.
	access := accessKey(repo.String(), src.Auth)
	digest := ""
	if entry.Digest != "" {
		digest = "sha256:" + strings.TrimPrefix(entry.Digest, "sha256:")
		if c := f.cachedChart(access + digest); c != nil {
			return c, nil
		}
	}
	ref, err := url.Parse(entry.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("chart %s %s: URL %q: %w", src.Chart, v, entry.URLs[0], err)
	}
	base := *repo
	base.Path = strings.TrimSuffix(base.Path, "/") + "/"
	chartURL := base.ResolveReference(ref)
	if chartURL.Scheme != "https" && chartURL.Scheme != "http" || repo.Scheme == "https" && chartURL.Scheme != "https" {
		return nil, fmt.Errorf("chart %s %s: the index names %s, not an https address", src.Chart, v, redacted(chartURL))
	}
	b, err := f.get(ctx, chartURL, src.Auth, repo.Host)
	if err != nil {
		return nil, err
	}
	got := digestOf(b)
	if digest != "" && got != digest {
		return nil, fmt.Errorf("chart %s %s from %s: its digest is %s, not the index's %s", src.Chart, v, redacted(chartURL), got, digest)
	}
	files, err := load(b)
	if err != nil {
		return nil, fmt.Errorf("chart %s %s from %s: %w", src.Chart, v, redacted(chartURL), err)
	}
	c := &Chart{Name: src.Chart, Version: v, Digest: got, Files: files}
	f.keep(access+got, c)
	return c, nil
}

// index is chart's versions in repo's index.yaml, or the copy read less
// than IndexTTL ago with the same credentials: an index read with
// credentials is never given to a caller without them. The index is parsed
// by Options.Index (a render child), never in this process beyond a small
// size.
func (f *Fetcher) index(ctx context.Context, repo *url.URL, auth *Auth, chart string) ([]indexEntry, error) {
	key := accessKey(repo.String(), auth) + chart
	f.mu.Lock()
	c, ok := f.indexes[key]
	f.mu.Unlock()
	if ok && time.Since(c.at) < f.o.IndexTTL {
		return c.entries, nil
	}
	u := *repo
	u.Path = strings.TrimSuffix(u.Path, "/") + "/index.yaml"
	b, err := f.get(ctx, &u, auth, repo.Host)
	if err != nil {
		return nil, err
	}
	var entries []indexEntry
	switch {
	case f.o.Index != nil:
		entries, err = f.o.Index(ctx, b, chart)
	case len(b) > inProcessIndexBytes:
		err = fmt.Errorf("index.yaml is %d bytes; one over %d is parsed only in a render child", len(b), inProcessIndexBytes)
	default:
		entries, err = helm.IndexEntries(b, chart)
	}
	if err != nil {
		return nil, fmt.Errorf("index of %s: %w", redacted(repo), err)
	}
	f.mu.Lock()
	for k, old := range f.indexes {
		if time.Since(old.at) >= f.o.IndexTTL {
			delete(f.indexes, k)
		}
	}
	f.indexes[key] = cachedIndex{at: time.Now(), entries: entries}
	f.mu.Unlock()
	return entries, nil
}

// Resolve picks the version a chart's version field asks for among
// versions, as source-controller does: an exact match first; else the
// highest version the range allows, "" and "*" meaning the latest stable
// one (prereleases count only for a range that names one).
func Resolve(versions []string, want string) (string, error) {
	for _, v := range versions {
		if want != "" && v == want {
			return v, nil
		}
	}
	if want == "" {
		want = "*"
	}
	c, err := semver.NewConstraint(want)
	if err != nil {
		return "", fmt.Errorf("version %q is not a semver range: %w", want, err)
	}
	type candidate struct {
		v   *semver.Version
		raw string
	}
	var ok []candidate
	for _, raw := range versions {
		v, err := semver.NewVersion(raw)
		if err != nil || !c.Check(v) {
			continue
		}
		ok = append(ok, candidate{v, raw})
	}
	if len(ok) == 0 {
		return "", fmt.Errorf("no version matches %q", want)
	}
	sort.SliceStable(ok, func(i, j int) bool { return ok[i].v.GreaterThan(ok[j].v) })
	return ok[0].raw, nil
}
