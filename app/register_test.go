package app

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/internal/githubfake"
)

// hostileDescription must reach GitHub byte for byte through the HTML form.
const hostileDescription = `Says "what" & <why>: </script><script>alert('x')</script> ü`

func registerConfig(t *testing.T, apiURL, webURL string) *config.Config {
	t.Helper()
	y := `manifest:
  name: driftback
  url: https://github.com/driftback/driftback
  description: ` + strconv.Quote(hostileDescription) + `
  hook_attributes:
    url: https://driftback.example.com/webhook
    active: true
  redirect_url: https://somewhere.example.com/callback
  default_permissions:
    contents: read
    pull_requests: write
  default_events: [pull_request, push]
github:
  apiURL: ` + apiURL + `
`
	if webURL != "" {
		y += "  webURL: " + webURL + "\n"
	}
	cfg, err := config.ParseConfig([]byte(y), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// registration is a Register running in the background.
type registration struct {
	page   string
	out    *bytes.Buffer
	done   chan struct{}
	reg    *Registration
	err    error
	cancel context.CancelFunc
}

// startRegister runs Register on a free loopback port and waits until its page
// is served.
func startRegister(t *testing.T, cfg *config.Config, org, outDir string) *registration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &registration{out: &bytes.Buffer{}, done: make(chan struct{}), cancel: cancel}
	ready := make(chan string, 1)
	opts := DefaultRegisterOptions()
	opts.Org, opts.OutDir, opts.Listen, opts.Out = org, outDir, "127.0.0.1:0", r.out
	opts.Ready = func(page string) { ready <- page }
	go func() {
		defer close(r.done)
		r.reg, r.err = Register(ctx, cfg, opts)
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	select {
	case r.page = <-ready:
	case <-r.done:
		t.Fatalf("Register returned before serving: %v", r.err)
	}
	return r
}

func (r *registration) wait() (*Registration, error) {
	<-r.done
	return r.reg, r.err
}

// noRedirects is a client that shows redirects instead of following them, as
// the test plays the browser step by step.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// registrationForm reads the page as a browser would: the form's action and
// its manifest field, unescaped by an HTML parser.
func registrationForm(t *testing.T, page string) (action, manifest string) {
	t.Helper()
	resp, err := noRedirects.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", page, resp.Status)
	}
	doc, err := html.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attr := map[string]string{}
			for _, a := range n.Attr {
				attr[a.Key] = a.Val
			}
			switch {
			case n.Data == "form" && strings.EqualFold(attr["method"], "post"):
				action = attr["action"]
			case n.Data == "input" && attr["name"] == "manifest":
				manifest = attr["value"]
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if action == "" || manifest == "" {
		t.Fatalf("the page has no POST form with a manifest field")
	}
	return action, manifest
}

// submit posts the manifest as the browser does and returns where GitHub
// sends the browser back.
func submit(t *testing.T, action, manifest string) *url.URL {
	t.Helper()
	resp, err := noRedirects.PostForm(action, url.Values{"manifest": {manifest}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("POST %s: %s: %s", action, resp.Status, body)
	}
	loc, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := noRedirects.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func newFake(t *testing.T) *githubfake.Fake {
	t.Helper()
	gh, err := githubfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gh.Close)
	return gh
}

func conversions(gh *githubfake.Fake) int {
	n := 0
	for _, c := range gh.Calls() {
		if strings.HasPrefix(c.Path, "/app-manifests/") || strings.HasPrefix(c.Path, "/api/v3/app-manifests/") {
			n++
		}
	}
	return n
}

// TestRegisterCreatesTheAppAndSavesItsCredentials proves the whole manifest
// flow against the fake over HTTP: the page posts the manifest (escaped so it
// arrives intact) to the user's or the organization's new-App page with a
// state, GitHub's redirect comes back to the local callback, the code is
// exchanged, the credentials land in 0600 files, and what is printed holds
// the App ID and next steps but no secret.
func TestRegisterCreatesTheAppAndSavesItsCredentials(t *testing.T) {
	cases := []struct {
		name       string
		org        string
		enterprise bool // the fake as GitHub Enterprise Server: web at /, API at /api/v3/
		wantPath   string
	}{
		{"a user's App on GitHub Enterprise Server, the web address derived from the API's", "", true, "/settings/apps/new"},
		{"an organization's App", "acme", false, "/organizations/acme/settings/apps/new"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gh := newFake(t)
			cfg := registerConfig(t, gh.URL(), gh.URL())
			if tc.enterprise {
				cfg = registerConfig(t, gh.URL()+"api/v3/", "")
				if cfg.GitHub.WebURL != gh.URL() {
					t.Fatalf("webURL %q, want %q", cfg.GitHub.WebURL, gh.URL())
				}
			}
			outDir := filepath.Join(t.TempDir(), "credentials")
			r := startRegister(t, cfg, tc.org, outDir)

			action, manifest := registrationForm(t, r.page)
			au, err := url.Parse(action)
			if err != nil {
				t.Fatal(err)
			}
			state := au.Query().Get("state")
			if au.Path != tc.wantPath || len(state) != 64 {
				t.Errorf("the form posts to %s, want %s with a 32-byte hex state", action, tc.wantPath)
			}
			callback := submit(t, action, manifest)
			wantCallback := strings.TrimSuffix(r.page, "/") + "/callback"
			if got := callback.Scheme + "://" + callback.Host + callback.Path; got != wantCallback {
				t.Errorf("GitHub sends the browser to %s, want the local %s", got, wantCallback)
			}
			status, body := get(t, callback.String())
			if status != http.StatusOK {
				t.Fatalf("callback: %d: %s", status, body)
			}
			reg, err := r.wait()
			if err != nil {
				t.Fatal(err)
			}

			apps := gh.RegisteredApps()
			if len(apps) != 1 {
				t.Fatalf("%d Apps registered, want 1", len(apps))
			}
			app := apps[0]
			if app.Org != tc.org || app.State != state || !app.Converted {
				t.Errorf("registered %+v: want org %q, the page's state, converted", app, tc.org)
			}
			if app.Manifest.RedirectURL != wantCallback {
				t.Errorf("manifest redirect_url %q, want %q: app.yml's points elsewhere", app.Manifest.RedirectURL, wantCallback)
			}
			if app.Manifest.Description != hostileDescription {
				t.Errorf("description arrived as %q", app.Manifest.Description)
			}
			if diff := cmp.Diff([]string{"pull_request", "push"}, app.Manifest.DefaultEvents); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}

			wantFiles := map[string]string{
				"driftback.private-key.pem": app.PEM,
				"driftback.webhook-secret":  app.WebhookSecret,
				"driftback.client-secret":   app.ClientSecret,
			}
			for name, want := range wantFiles {
				path := filepath.Join(outDir, name)
				info, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if info.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want 0600", name, info.Mode().Perm())
				}
				if got, _ := os.ReadFile(path); string(got) != want {
					t.Errorf("%s does not hold what GitHub handed out", name)
				}
			}
			if info, err := os.Stat(outDir); err != nil || info.Mode().Perm() != 0o700 {
				t.Errorf("output directory: %v, %v; want mode 0700", info, err)
			}
			if reg.ID != app.ID || reg.PrivateKeyFile != filepath.Join(outDir, "driftback.private-key.pem") ||
				reg.InstallURL != gh.Server.URL+"/apps/driftback/installations/new" {
				t.Errorf("registration %+v", reg)
			}

			out := r.out.String()
			for _, want := range []string{
				"appID: " + strconv.FormatInt(app.ID, 10),
				"privateKeyFile: " + reg.PrivateKeyFile,
				"webhookSecretFile: " + reg.WebhookSecretFile,
				reg.InstallURL,
			} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			for what, secret := range map[string]string{"private key": strings.Split(app.PEM, "\n")[1], "webhook secret": app.WebhookSecret,
				"client secret": app.ClientSecret, "code": callback.Query().Get("code")} {
				if strings.Contains(out, secret) || strings.Contains(body, secret) {
					t.Errorf("the %s is printed or shown", what)
				}
			}
			if !strings.Contains(body, reg.WebhookSecretFile) {
				t.Errorf("the callback page does not say where the files are:\n%s", body)
			}

			// Done: the local server is gone.
			if _, err := http.Get(r.page); err == nil {
				t.Errorf("the registration page is still served")
			}
		})
	}
}

// TestRegisterRefusesAWrongState proves a callback without the page's state
// is refused and exchanges nothing, and that the registration then still
// completes.
func TestRegisterRefusesAWrongState(t *testing.T) {
	gh := newFake(t)
	outDir := t.TempDir()
	r := startRegister(t, registerConfig(t, gh.URL(), gh.URL()), "", outDir)
	action, manifest := registrationForm(t, r.page)
	callback := submit(t, action, manifest)

	for name, state := range map[string]string{"a wrong state": strings.Repeat("0", 64), "no state": ""} {
		q := callback.Query()
		q.Set("state", state)
		if state == "" {
			q.Del("state")
		}
		forged := *callback
		forged.RawQuery = q.Encode()
		if status, _ := get(t, forged.String()); status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, status)
		}
	}
	if n := conversions(gh); n != 0 {
		t.Errorf("%d codes exchanged after forged callbacks", n)
	}
	if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
		t.Errorf("files written after forged callbacks: %v", entries)
	}

	if status, body := get(t, callback.String()); status != http.StatusOK {
		t.Fatalf("the real callback: %d: %s", status, body)
	}
	if _, err := r.wait(); err != nil {
		t.Fatal(err)
	}
}

// TestRegisterRefusesOtherHostNames proves the page, which holds the state, is
// not served under a host name that is not this machine's: a web page that
// rebinds its own name to 127.0.0.1 cannot read it.
func TestRegisterRefusesOtherHostNames(t *testing.T) {
	gh := newFake(t)
	r := startRegister(t, registerConfig(t, gh.URL(), gh.URL()), "", t.TempDir())
	u, err := url.Parse(r.page)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(u.Host)
	for host, want := range map[string]int{"rebound.example:" + port: http.StatusForbidden, "localhost:" + port: http.StatusOK, u.Host: http.StatusOK} {
		req, err := http.NewRequest(http.MethodGet, r.page, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: status %d, want %d", host, resp.StatusCode, want)
		}
		if want != http.StatusOK && strings.Contains(string(body), "state=") {
			t.Errorf("Host %s: the page with the state is served", host)
		}
	}
}

// TestRegisterNeverOverwritesCredentials proves an existing file is an error
// that names it and keeps its content, whether it is there before the page
// is served or appears while the person is on GitHub.
func TestRegisterNeverOverwritesCredentials(t *testing.T) {
	t.Run("a file there before the page is served", func(t *testing.T) {
		gh := newFake(t)
		outDir := t.TempDir()
		existing := filepath.Join(outDir, "driftback.webhook-secret")
		if err := os.WriteFile(existing, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		opts := DefaultRegisterOptions()
		opts.OutDir, opts.Listen = outDir, "127.0.0.1:0"
		opts.Ready = func(string) { t.Error("the page is served") }
		_, err := Register(context.Background(), registerConfig(t, gh.URL(), gh.URL()), opts)
		if err == nil || !strings.Contains(err.Error(), existing) {
			t.Errorf("error %v, want one naming %s", err, existing)
		}
		if b, _ := os.ReadFile(existing); string(b) != "keep me" {
			t.Errorf("the existing file was overwritten")
		}
	})

	t.Run("a file that appears during the registration", func(t *testing.T) {
		gh := newFake(t)
		outDir := t.TempDir()
		r := startRegister(t, registerConfig(t, gh.URL(), gh.URL()), "", outDir)
		existing := filepath.Join(outDir, "driftback.private-key.pem")
		if err := os.WriteFile(existing, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		action, manifest := registrationForm(t, r.page)
		status, _ := get(t, submit(t, action, manifest).String())
		if status == http.StatusOK {
			t.Errorf("the callback says success")
		}
		_, err := r.wait()
		if err == nil || !strings.Contains(err.Error(), existing) || !strings.Contains(err.Error(), "was created") {
			t.Errorf("error %v, want one naming %s and saying the App exists", err, existing)
		}
		if b, _ := os.ReadFile(existing); string(b) != "keep me" {
			t.Errorf("the existing file was overwritten")
		}
		entries, _ := os.ReadDir(outDir)
		if len(entries) != 1 {
			t.Errorf("files beside the existing one were written: %v", entries)
		}
	})
}

// TestRegisterWithAUsedCode proves a code GitHub already exchanged is an
// error, and nothing is written.
func TestRegisterWithAUsedCode(t *testing.T) {
	gh := newFake(t)
	cfg := registerConfig(t, gh.URL(), gh.URL())
	first := startRegister(t, cfg, "", t.TempDir())
	action, manifest := registrationForm(t, first.page)
	used := submit(t, action, manifest)
	if status, body := get(t, used.String()); status != http.StatusOK {
		t.Fatalf("first registration: %d: %s", status, body)
	}
	if _, err := first.wait(); err != nil {
		t.Fatal(err)
	}

	outDir := t.TempDir()
	second := startRegister(t, cfg, "", outDir)
	action, _ = registrationForm(t, second.page)
	au, _ := url.Parse(action)
	replay, _ := url.Parse(strings.TrimSuffix(second.page, "/") + "/callback")
	replay.RawQuery = url.Values{"code": {used.Query().Get("code")}, "state": {au.Query().Get("state")}}.Encode()
	if status, _ := get(t, replay.String()); status != http.StatusBadGateway {
		t.Errorf("callback with a used code: status %d, want 502", status)
	}
	_, err := second.wait()
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("error %v, want GitHub's 404", err)
	}
	if strings.Contains(err.Error(), used.Query().Get("code")) {
		t.Errorf("the error shows the code: %v", err)
	}
	if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
		t.Errorf("files written: %v", entries)
	}
}

// TestRegisterValidatesFirst proves what GitHub would refuse is an error
// naming the app.yml key before anything is served.
func TestRegisterValidatesFirst(t *testing.T) {
	cases := []struct {
		name   string
		change func(*config.Config, *RegisterOptions)
		says   string
	}{
		{"a manifest without a name", func(c *config.Config, _ *RegisterOptions) { c.Manifest.Name = "" }, "manifest.name: missing"},
		{"a manifest without a url", func(c *config.Config, _ *RegisterOptions) { c.Manifest.URL = "" }, "manifest.url: missing"},
		{"a manifest without a webhook url", func(c *config.Config, _ *RegisterOptions) { c.Manifest.HookAttributes.URL = "" }, "manifest.hook_attributes.url: missing"},
		{"a webhook url that is no URL", func(c *config.Config, _ *RegisterOptions) { c.Manifest.HookAttributes.URL = "driftback.example.com" }, "manifest.hook_attributes.url: \"driftback.example.com\" is not an http(s) URL"},
		{"a manifest without events", func(c *config.Config, _ *RegisterOptions) { c.Manifest.DefaultEvents = nil }, "manifest.default_events: empty"},
		{"a web address that cannot be derived", func(c *config.Config, _ *RegisterOptions) { c.GitHub.WebURL = "" }, "github.webURL"},
		{"an organization name with a slash", func(_ *config.Config, o *RegisterOptions) { o.Org = "acme/evil" }, `organization "acme/evil"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := registerConfig(t, "http://127.0.0.1:1/", "http://127.0.0.1:1/")
			opts := DefaultRegisterOptions()
			opts.OutDir, opts.Listen = t.TempDir(), "127.0.0.1:0"
			opts.Ready = func(string) { t.Error("the page is served") }
			tc.change(cfg, &opts)
			_, err := Register(context.Background(), cfg, opts)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
}

// TestRedirectURLIsKeptOnlyWhenItPointsHere proves app.yml's redirect_url is
// used as written only when it reaches the local server's callback.
func TestRedirectURLIsKeptOnlyWhenItPointsHere(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8383}
	all := &net.TCPAddr{IP: net.IPv4zero, Port: 8383}
	cases := []struct {
		name       string
		addr       *net.TCPAddr
		configured string
		base, want string
	}{
		{"none set", loopback, "", "http://127.0.0.1:8383", "http://127.0.0.1:8383/callback"},
		{"localhost on the listening port", loopback, "http://localhost:8383/callback", "http://localhost:8383", "http://localhost:8383/callback"},
		{"another host", loopback, "https://driftback.example.com/callback", "http://127.0.0.1:8383", "http://127.0.0.1:8383/callback"},
		{"another port", loopback, "http://localhost:9000/callback", "http://127.0.0.1:8383", "http://127.0.0.1:8383/callback"},
		{"another path", loopback, "http://localhost:8383/done", "http://127.0.0.1:8383", "http://127.0.0.1:8383/callback"},
		{"https, which the local server does not speak", loopback, "https://localhost:8383/callback", "http://127.0.0.1:8383", "http://127.0.0.1:8383/callback"},
		{"a machine name when listening everywhere", all, "http://build-box.lan:8383/callback", "http://build-box.lan:8383", "http://build-box.lan:8383/callback"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, got := localURLs(tc.addr, tc.configured)
			if base != tc.base || got != tc.want {
				t.Errorf("got %s and %s, want %s and %s", base, got, tc.base, tc.want)
			}
		})
	}
}

// TestWebURLIsDerivedFromTheAPI proves github.webURL defaults from apiURL for
// github.com, GHE.com and GitHub Enterprise Server, and stays as set.
func TestWebURLIsDerivedFromTheAPI(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"github.com by default", "", "https://github.com/"},
		{"GHE.com", "github:\n  apiURL: https://api.acme.ghe.com/\n", "https://acme.ghe.com/"},
		{"GitHub Enterprise Server", "github:\n  apiURL: https://ghe.example.com/api/v3\n", "https://ghe.example.com/"},
		{"an address of neither shape", "github:\n  apiURL: https://proxy.example.com/github/\n", ""},
		{"set explicitly", "github:\n  apiURL: https://proxy.example.com/github/\n  webURL: https://ghe.example.com\n", "https://ghe.example.com/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.ParseConfig([]byte(tc.yaml), envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.GitHub.WebURL != tc.want {
				t.Errorf("webURL %q, want %q", cfg.GitHub.WebURL, tc.want)
			}
		})
	}
}
