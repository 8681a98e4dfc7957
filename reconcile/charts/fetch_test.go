package charts

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/driftback/driftback/internal/helmtest"
	"github.com/driftback/driftback/internal/testfs"
	"github.com/driftback/driftback/render"
)

// shop is the fixture chart at version v.
func shop(t *testing.T, v string) map[string][]byte {
	files := testfs.Read(t, filepath.Join("..", "..", "render", "helm", "testdata", "shop"))
	files["Chart.yaml"] = []byte(strings.Replace(string(files["Chart.yaml"]), "version: 1.2.0", "version: "+v, 1))
	return files
}

// local lets the fetcher reach the test's servers on loopback.
func local(o Options) *Fetcher {
	o.PrivateHosts = append(o.PrivateHosts, "127.0.0.1")
	return New(o)
}

func TestAnHTTPRepositoryResolvesRangesAsSourceControllerDoes(t *testing.T) {
	repo := helmtest.NewRepo(t)
	for _, v := range []string{"1.2.0", "1.3.0", "1.4.0-rc.1", "2.0.0"} {
		repo.Add(t, shop(t, v))
	}
	f := local(Options{})
	for _, c := range []struct{ want, got string }{
		{"", "2.0.0"}, {"*", "2.0.0"}, {"1.x", "1.3.0"}, {"~1.2", "1.2.0"},
		{">=1.4.0-0 <2", "1.4.0-rc.1"}, {"1.4.0-rc.1", "1.4.0-rc.1"},
	} {
		ch, err := f.Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop", Version: c.want})
		if err != nil {
			t.Fatalf("%q: %v", c.want, err)
		}
		if ch.Version != c.got || ch.Name != "shop" || len(ch.Files["templates/deployment.yaml"]) == 0 {
			t.Errorf("version %q gave %s %s (%d files), want %s", c.want, ch.Name, ch.Version, len(ch.Files), c.got)
		}
	}
	if _, err := f.Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop", Version: "3.x"}); err == nil || !strings.Contains(err.Error(), `no version matches "3.x"`) {
		t.Errorf("a range nothing matches: %v", err)
	}
	if _, err := f.Fetch(context.Background(), Source{URL: repo.URL, Chart: "till"}); err == nil || !strings.Contains(err.Error(), `no chart "till"`) {
		t.Errorf("a chart the repository lacks: %v", err)
	}
}

func TestChartsAreCachedByDigest(t *testing.T) {
	repo := helmtest.NewRepo(t)
	repo.Add(t, shop(t, "1.2.0"))
	f := local(Options{})
	first, err := f.Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop", Version: "1.2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if n := repo.Requests(); n != 2 {
		t.Fatalf("the first fetch made %d requests, want the index and the archive", n)
	}
	again, err := f.Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop", Version: "1.x"})
	if err != nil {
		t.Fatal(err)
	}
	if n := repo.Requests(); n != 2 || again.Digest != first.Digest {
		t.Errorf("the second fetch made %d requests in all (want none more), digest %s vs %s", n, again.Digest, first.Digest)
	}
	// A fresh index (its time passed) still finds the archive by digest.
	f.o.IndexTTL = -1
	if _, err := f.Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop"}); err != nil {
		t.Fatal(err)
	}
	if n := repo.Requests(); n != 3 {
		t.Errorf("with the index read again: %d requests in all, want 3 (no archive)", n)
	}
}

func TestAnArchiveMustMatchTheIndexDigest(t *testing.T) {
	repo := helmtest.NewRepo(t)
	repo.Add(t, shop(t, "1.2.0"))
	// Another archive under the same name: what a compromised file host
	// serves behind an unchanged index.
	tampered := helmtest.NewRepo(t)
	tampered.Add(t, shop(t, "1.2.0"))
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/index.yaml" {
			repo.Config.Handler.ServeHTTP(w, r)
			return
		}
		files := shop(t, "1.2.0")
		files["templates/extra.yaml"] = []byte("kind: ConfigMap\napiVersion: v1\nmetadata: {name: extra}\n")
		_, _ = w.Write(helmtest.Package(t, files))
	}))
	defer swap.Close()
	_, err := local(Options{}).Fetch(context.Background(), Source{URL: swap.URL, Chart: "shop"})
	if err == nil || !strings.Contains(err.Error(), "not the index's sha256:") {
		t.Fatalf("a swapped archive: %v", err)
	}
}

func TestFetchesDoNotReachInsideTheNetwork(t *testing.T) {
	repo := helmtest.NewRepo(t)
	repo.Add(t, shop(t, "1.2.0"))
	_, err := New(Options{}).Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop"})
	var private *PrivateAddressError
	if !errors.As(err, &private) || private.IP != "127.0.0.1" {
		t.Fatalf("a loopback repository: %v", err)
	}
	if n := repo.Requests(); n != 0 {
		t.Errorf("the repository got %d requests", n)
	}
	for _, ip := range []string{"10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "::1", "fe80::1", "fd00::1", "0.0.0.0",
		"::ffff:10.0.0.1", "::ffff:127.0.0.1", // IPv4-mapped
		"0.1.2.3", "192.0.0.170", "198.18.0.1", "198.19.255.255", "240.0.0.1", "255.255.255.255",
		"64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:1", // NAT64 to the metadata address, to 10.0.0.1
		"::a9fe:a9fe", "::7f00:1", // IPv4-compatible
		"2002:a9fe:a9fe::1", "2001:0:a9fe:a9fe::1", // 6to4, Teredo
		"fec0::1", "100::1",
	} {
		if !internal(parseIP(t, ip)) {
			t.Errorf("%s is not counted as inside the network", ip)
		}
	}
	for _, ip := range []string{"8.8.8.8", "140.82.112.3", "2606:4700::1111"} {
		if internal(parseIP(t, ip)) {
			t.Errorf("%s is counted as inside the network", ip)
		}
	}
}

func TestRedirectsStayOnTheirHost(t *testing.T) {
	repo := helmtest.NewRepo(t)
	repo.Add(t, shop(t, "1.2.0"))
	u, _ := url.Parse(repo.URL)
	// localhost and 127.0.0.1 are two hosts for the redirect rule.
	away := httptest.NewServer(http.RedirectHandler("http://localhost:"+u.Port()+"/index.yaml", http.StatusFound))
	defer away.Close()
	f := local(Options{PrivateHosts: []string{"localhost"}})
	_, err := f.Fetch(context.Background(), Source{URL: away.URL, Chart: "shop"})
	if err == nil || !strings.Contains(err.Error(), "redirected to another host") {
		t.Fatalf("a redirect to another host: %v", err)
	}
	if n := repo.Requests(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
	// The repository moved on its host: the index and the archive are
	// both redirected there, and the chart is fetched.
	same := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/moved/"); ok {
			http.Redirect(w, r, "/"+rest, http.StatusMovedPermanently)
			return
		}
		repo.Config.Handler.ServeHTTP(w, r)
	}))
	defer same.Close()
	before := repo.Requests()
	c, err := f.Fetch(context.Background(), Source{URL: same.URL + "/moved", Chart: "shop"})
	if err != nil || len(c.Files["Chart.yaml"]) == 0 {
		t.Errorf("a redirect on the same host was refused: %v", err)
	}
	if n := repo.Requests() - before; n != 2 {
		t.Errorf("the moved repository answered %d requests, want the index and the archive", n)
	}
}

func TestADownloadIsBounded(t *testing.T) {
	repo := helmtest.NewRepo(t)
	repo.Add(t, shop(t, "1.2.0"))
	_, err := local(Options{MaxBytes: 64}).Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop"})
	if err == nil || !strings.Contains(err.Error(), "larger than 64 bytes") {
		t.Fatalf("an index over the bound: %v", err)
	}
}

func TestCredentialsGoOnlyToTheRepository(t *testing.T) {
	repo := helmtest.NewRepo(t)
	repo.Auth = &[2]string{"reader", "s3cret-token"}
	repo.Add(t, shop(t, "1.2.0"))
	f := local(Options{})
	_, err := f.Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop"})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("without credentials: %v", err)
	}
	if _, err := f.Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop", Auth: &Auth{"reader", "s3cret-token"}}); err != nil {
		t.Fatalf("with credentials: %v", err)
	}

	// The index names its archive on another host (a CDN): the archive
	// is fetched without the repository's credentials.
	tgz := helmtest.Package(t, shop(t, "1.2.0"))
	var sawAuth atomic.Int64
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			sawAuth.Add(1)
		}
		_, _ = w.Write(tgz)
	}))
	defer cdn.Close()
	cu, _ := url.Parse(cdn.URL)
	index := fmt.Sprintf("apiVersion: v1\nentries:\n  shop:\n  - {name: shop, version: 1.2.0, urls: ['http://localhost:%s/shop-1.2.0.tgz'], digest: %x}\n", cu.Port(), sha256.Sum256(tgz))
	withCDN := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "reader" || p != "s3cret-token" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(index))
	}))
	defer withCDN.Close()
	f = local(Options{PrivateHosts: []string{"localhost"}})
	if _, err := f.Fetch(context.Background(), Source{URL: withCDN.URL, Chart: "shop", Auth: &Auth{"reader", "s3cret-token"}}); err != nil {
		t.Fatalf("an archive on another host: %v", err)
	}
	if n := sawAuth.Load(); n != 0 {
		t.Errorf("the repository's credentials were sent to another host %d times", n)
	}
}

func TestAnOCIRegistryServesCharts(t *testing.T) {
	reg := helmtest.NewRegistry(t)
	var digest string
	for _, v := range []string{"1.2.0", "1.3.0+build.7", "2.0.0-beta.1"} {
		digest = reg.Push(t, "charts", shop(t, v))
	}
	f := local(Options{})
	base := "oci://" + reg.Host() + "/charts"
	for _, c := range []struct{ version, digest, got string }{
		{"", "", "1.3.0+build.7"}, {"1.2.0", "", "1.2.0"}, {">=2.0.0-0", "", "2.0.0-beta.1"}, {"", digest, "2.0.0-beta.1"},
	} {
		ch, err := f.Fetch(context.Background(), Source{URL: base, Chart: "shop", Version: c.version, Digest: c.digest})
		if err != nil {
			t.Fatalf("%q %s: %v", c.version, c.digest, err)
		}
		if ch.Version != c.got || len(ch.Files["values.yaml"]) == 0 {
			t.Errorf("%q %s gave %s", c.version, c.digest, ch.Version)
		}
	}
	// An OCIRepository names the chart's repository itself.
	ch, err := f.Fetch(context.Background(), Source{URL: base + "/shop", Version: "1.x"})
	if err != nil || ch.Version != "1.3.0+build.7" {
		t.Fatalf("the repository's own URL: %v %+v", err, ch)
	}
	before := reg.Requests()
	if _, err := f.Fetch(context.Background(), Source{URL: base, Chart: "shop", Version: "1.2.0"}); err != nil {
		t.Fatal(err)
	}
	// The manifest is read again (a tag moves); the layer is not.
	if n := reg.Requests() - before; n > 2 {
		t.Errorf("a cached chart took %d requests", n)
	}
	if _, err := New(Options{}).Fetch(context.Background(), Source{URL: base, Chart: "shop"}); err == nil || !strings.Contains(err.Error(), "inside the network") {
		t.Errorf("a loopback registry without privateHosts: %v", err)
	}
}

func parseIP(t *testing.T, s string) net.IP {
	ip := net.ParseIP(s)
	if ip == nil {
		t.Fatalf("%s is not an IP", s)
	}
	return ip
}

// TestTheCacheServesOnlyWhatTheCallerCouldFetch: one fetcher serves every
// installation. A chart fetched from a private repository with its
// credentials is not served from the cache to a fetch without them (the
// index is not either), nor to a repository whose index names the same
// digest, nor to a registry whose manifest names the same layer.
func TestTheCacheServesOnlyWhatTheCallerCouldFetch(t *testing.T) {
	ctx := context.Background()
	private := helmtest.NewRepo(t)
	private.Auth = &[2]string{"reader", "s3cret-token"}
	private.Add(t, shop(t, "1.2.0"))
	f := local(Options{})
	got, err := f.Fetch(ctx, Source{URL: private.URL, Chart: "shop", Auth: &Auth{"reader", "s3cret-token"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(ctx, Source{URL: private.URL, Chart: "shop"}); err == nil || !strings.Contains(err.Error(), "index.yaml: 401") {
		t.Errorf("without credentials, after a fetch with them: %v, want the repository's 401 for its index", err)
	}

	// Credentials in the address are credentials too.
	inURL := helmtest.NewRepo(t)
	inURL.Auth = &[2]string{"reader", "s3cret-token"}
	inURL.Add(t, shop(t, "1.2.0"))
	if _, err := f.Fetch(ctx, Source{URL: strings.Replace(inURL.URL, "http://", "http://reader:s3cret-token@", 1), Chart: "shop"}); err != nil {
		t.Fatalf("credentials in the address: %v", err)
	}
	if _, err := f.Fetch(ctx, Source{URL: inURL.URL, Chart: "shop"}); err == nil || !strings.Contains(err.Error(), "index.yaml: 401") {
		t.Errorf("without credentials, after a fetch with them in the address: %v, want the repository's 401", err)
	}

	// Another repository's index names the private chart's digest; it has
	// no such archive.
	index := "apiVersion: v1\nentries:\n  shop:\n  - {name: shop, version: 1.2.0, urls: [charts/shop-1.2.0.tgz], digest: " + strings.TrimPrefix(got.Digest, "sha256:") + "}\n"
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/index.yaml" {
			_, _ = w.Write([]byte(index))
			return
		}
		http.NotFound(w, r)
	}))
	defer other.Close()
	if c, err := f.Fetch(ctx, Source{URL: other.URL, Chart: "shop"}); err == nil {
		t.Errorf("another repository naming the digest got the private chart (%d files)", len(c.Files))
	}

	// A registry behind credentials, and another whose manifest names the
	// same layer.
	reg := helmtest.NewRegistry(t)
	reg.Auth = &[2]string{"reader", "s3cret-token"}
	reg.Push(t, "private", shop(t, "1.2.0"))
	layer, err := f.Fetch(ctx, Source{URL: "oci://" + reg.Host() + "/private", Chart: "shop", Version: "1.2.0", Auth: &Auth{"reader", "s3cret-token"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(ctx, Source{URL: "oci://" + reg.Host() + "/private", Chart: "shop", Version: "1.2.0"}); err == nil {
		t.Error("a registry's chart without its credentials, after a fetch with them")
	}
	manifest := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
		`"config":{"mediaType":"application/vnd.cncf.helm.config.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},` +
		`"layers":[{"mediaType":"application/vnd.cncf.helm.chart.content.v1.tar+gzip","digest":"` + layer.Digest + `","size":100}]}`
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, "/manifests/1.2.0"):
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			_, _ = w.Write([]byte(manifest))
		default:
			http.NotFound(w, r)
		}
	}))
	defer attacker.Close()
	u, _ := url.Parse(attacker.URL)
	if c, err := f.Fetch(ctx, Source{URL: "oci://" + u.Host + "/charts", Chart: "shop", Version: "1.2.0"}); err == nil {
		t.Errorf("a registry whose manifest names the layer got the private chart (%d files)", len(c.Files))
	}
}

// TestRegistryResponsesAreBoundedWhileRead: a registry's tag list larger
// than the bound is refused as it is read, whatever length it announces.
func TestRegistryResponsesAreBoundedWhileRead(t *testing.T) {
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, "/tags/list"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"name":"charts/shop","tags":["`))
			for i := 0; i < 1<<16; i++ {
				_, _ = w.Write([]byte(`1.0.0","`))
			}
			_, _ = w.Write([]byte(`1.0.1"]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer huge.Close()
	u, _ := url.Parse(huge.URL)
	_, err := local(Options{MaxBytes: 64 << 10}).Fetch(context.Background(), Source{URL: "oci://" + u.Host + "/charts", Chart: "shop", Version: "1.x"})
	if err == nil || !strings.Contains(err.Error(), "larger than 65536 bytes") {
		t.Errorf("a tag list over the bound: %v", err)
	}
}

// TestALargeIndexIsParsedOutsideTheProcess: a repository serves an index
// of 8 MiB (40,000 versions), which parsing takes hundreds of megabytes
// for. With the render child parsing it (as serve wires it), this process
// allocates a small multiple of the download, and the chart is fetched;
// without it, an index over 1 MiB is refused, unparsed.
func TestALargeIndexIsParsedOutsideTheProcess(t *testing.T) {
	tgz := helmtest.Package(t, shop(t, "1.2.0"))
	var b strings.Builder
	b.WriteString("apiVersion: v1\nentries:\n  shop:\n")
	fmt.Fprintf(&b, "  - {name: shop, version: 1.2.0, urls: [charts/shop-1.2.0.tgz], digest: %x}\n", sha256.Sum256(tgz))
	for i := 0; b.Len() < 8<<20; i++ {
		fmt.Fprintf(&b, "  - {name: shop, version: 0.%d.0, urls: [charts/shop-0.%d.0.tgz], digest: %064d, description: %q}\n", i, i, i, strings.Repeat("a chart version of the shop ", 4))
	}
	index := b.String()
	repo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/index.yaml":
			_, _ = w.Write([]byte(index))
		case "/charts/shop-1.2.0.tgz":
			_, _ = w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	}))
	defer repo.Close()

	f := local(Options{Index: render.New(render.Options{}).ChartIndex})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c, err := f.Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop", Version: "1.2.0"})
	runtime.ReadMemStats(&after)
	if err != nil || c.Version != "1.2.0" {
		t.Fatalf("the chart of a large index: %v", err)
	}
	// Parsed here, it took 237 MB (without the race detector, which
	// allocates more, and under which make test runs this).
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 12*uint64(len(index)) {
		t.Errorf("fetching through an index of %d bytes allocated %d bytes in this process", len(index), alloc)
	}
	if _, err := local(Options{}).Fetch(context.Background(), Source{URL: repo.URL, Chart: "shop", Version: "1.2.0"}); err == nil || !strings.Contains(err.Error(), "parsed only in a render child") {
		t.Errorf("a large index without a render child: %v", err)
	}
}

// TestKustomizeChartsArePulledFromTrustedRepositories: a kustomization's
// helmCharts entry with a repo and a version that its chartHome lacks is
// fetched where kustomize's helm pull puts it, from a repository the
// default branch names (its own helmCharts count); from any other, nothing
// is asked, and why is said. A vendored chart is not fetched.
func TestKustomizeChartsArePulledFromTrustedRepositories(t *testing.T) {
	repo := helmtest.NewRepo(t)
	repo.Add(t, shop(t, "1.2.0"))
	kust := "helmCharts:\n- name: shop\n  version: 1.2.0\n  repo: " + repo.URL + "\n  releaseName: shop\n"
	tree := testfs.Tree(t, map[string]string{"app/kustomization.yaml": kust, "vendored/kustomization.yaml": kust,
		"vendored/charts/shop-1.2.0/shop/Chart.yaml": "apiVersion: v2\nname: shop\nversion: 1.2.0\n"})
	defaults := testfs.Tree(t, map[string]string{"app/kustomization.yaml": kust})
	f := local(Options{})

	files, problems := Pulled(context.Background(), tree, "app", f, NewTrust(nil).With(defaults))
	if len(problems) > 0 || len(files["app/charts/shop-1.2.0/shop/templates/deployment.yaml"]) == 0 {
		t.Errorf("a trusted repository: problems %v, files %d", problems, len(files))
	}
	asked := repo.Requests()
	files, problems = Pulled(context.Background(), tree, "app", f, NewTrust(nil).With(testfs.Tree(t, map[string]string{"README.md": "x"})))
	if len(files) != 0 || len(problems) != 1 || !strings.Contains(problems[0], "not trusted yet") || repo.Requests() != asked {
		t.Errorf("an untrusted repository: files %d, problems %v, requests %d more", len(files), problems, repo.Requests()-asked)
	}
	if files, problems = Pulled(context.Background(), tree, "vendored", f, NewTrust(nil)); len(files)+len(problems) != 0 {
		t.Errorf("a vendored chart: files %d, problems %v", len(files), problems)
	}
}

// TestKustomizeChartsFromARegistryAreTrustedByTheirRepository: an oci://
// helmCharts repo the default branch names is trusted for its charts (the
// address kustomize pulls is repo/name).
func TestKustomizeChartsFromARegistryAreTrustedByTheirRepository(t *testing.T) {
	reg := helmtest.NewRegistry(t)
	reg.Push(t, "charts", shop(t, "1.2.0"))
	kust := "helmCharts:\n- name: shop\n  version: 1.2.0\n  repo: oci://" + reg.Host() + "/charts\n"
	tree := testfs.Tree(t, map[string]string{"app/kustomization.yaml": kust})
	files, problems := Pulled(context.Background(), tree, "app", local(Options{}), NewTrust(nil).With(tree))
	if len(problems) > 0 || len(files["app/charts/shop-1.2.0/shop/Chart.yaml"]) == 0 {
		t.Errorf("a trusted registry: problems %v, %d files", problems, len(files))
	}
}
