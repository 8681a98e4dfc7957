// Package helmtest serves Helm charts to tests as real repositories do: an
// HTTP chart repository (index.yaml and .tgz archives) and an OCI registry
// (go-containerregistry's, in process), each counting the requests it gets.
package helmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// Package is the .tgz `helm package` makes of a chart's files (paths from
// the chart's root), under a directory named for the chart.
func Package(t testing.TB, files map[string][]byte) []byte {
	t.Helper()
	meta := Meta(t, files)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: meta.Name + "/" + n, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ChartMeta is a chart's name and version, from its Chart.yaml.
type ChartMeta struct{ Name, Version string }

// Meta reads a chart's Chart.yaml.
func Meta(t testing.TB, files map[string][]byte) ChartMeta {
	t.Helper()
	var m ChartMeta
	if err := yaml.Unmarshal(files["Chart.yaml"], &m); err != nil || m.Name == "" || m.Version == "" {
		t.Fatalf("Chart.yaml: %v (name %q, version %q)", err, m.Name, m.Version)
	}
	return m
}

// Repo is an HTTP chart repository.
type Repo struct {
	*httptest.Server
	mu       sync.Mutex
	archives map[string][]byte // by file name
	entries  map[string][]map[string]any
	requests atomic.Int64
	// Auth, when set, is the basic credentials every request must carry.
	Auth *[2]string
}

// NewRepo serves an empty chart repository until the test ends.
func NewRepo(t testing.TB) *Repo {
	r := &Repo{archives: map[string][]byte{}, entries: map[string][]map[string]any{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

// Add publishes a chart (its files by path from its root).
func (r *Repo) Add(t testing.TB, files map[string][]byte) {
	t.Helper()
	meta := Meta(t, files)
	tgz := Package(t, files)
	file := fmt.Sprintf("%s-%s.tgz", meta.Name, meta.Version)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archives[file] = tgz
	r.entries[meta.Name] = append(r.entries[meta.Name], map[string]any{
		"apiVersion": "v2", "name": meta.Name, "version": meta.Version,
		"urls": []string{"charts/" + file}, "digest": fmt.Sprintf("%x", sha256.Sum256(tgz)),
	})
}

// Requests is how many requests the repository got.
func (r *Repo) Requests() int64 { return r.requests.Load() }

func (r *Repo) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	if r.Auth != nil {
		if u, p, ok := req.BasicAuth(); !ok || u != r.Auth[0] || p != r.Auth[1] {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case req.URL.Path == "/index.yaml":
		b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "entries": r.entries})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(b)
	case strings.HasPrefix(req.URL.Path, "/charts/"):
		b, ok := r.archives[strings.TrimPrefix(req.URL.Path, "/charts/")]
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(b)
	default:
		http.NotFound(w, req)
	}
}

// Registry is an OCI registry.
type Registry struct {
	*httptest.Server
	requests atomic.Int64
	// Auth, when set, is the basic credentials every request must carry
	// (the test's own pushes carry them).
	Auth *[2]string
}

// NewRegistry serves an empty registry until the test ends.
func NewRegistry(t testing.TB) *Registry {
	r := &Registry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if a := r.Auth; a != nil && req.Header.Get("X-Helmtest-Push") == "" {
			if u, p, ok := req.BasicAuth(); !ok || u != a[0] || p != a[1] {
				w.Header().Set("WWW-Authenticate", `Basic realm="helmtest"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// Host is the registry's host:port.
func (r *Registry) Host() string {
	u, _ := url.Parse(r.URL)
	return u.Host
}

// Requests is how many requests the registry got.
func (r *Registry) Requests() int64 { return r.requests.Load() }

// Push pushes a chart as `helm push` does, to HOST/path/NAME:VERSION ("+"
// in the version written "_"), and returns its manifest's digest.
func (r *Registry) Push(t testing.TB, path string, files map[string][]byte) string {
	t.Helper()
	meta := Meta(t, files)
	layer := static.NewLayer(Package(t, files), "application/vnd.cncf.helm.chart.content.v1.tar+gzip")
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), "application/vnd.cncf.helm.config.v1+json")
	ref, err := name.ParseReference(fmt.Sprintf("%s/%s/%s:%s", r.Host(), strings.Trim(path, "/"), meta.Name, strings.ReplaceAll(meta.Version, "+", "_")))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(pushing{http.DefaultTransport})); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// pushing marks the test's own pushes, which a registry with Auth lets
// through.
type pushing struct{ rt http.RoundTripper }

func (p pushing) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Helmtest-Push", "1")
	return p.rt.RoundTrip(r)
}
