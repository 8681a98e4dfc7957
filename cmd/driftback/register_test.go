package main

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/driftback/driftback/internal/githubfake"
)

func TestRegisterCommandErrors(t *testing.T) {
	noName := filepath.Join(t.TempDir(), "app.yml")
	if err := os.WriteFile(noName, []byte("manifest:\n  url: https://example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		says []string
	}{
		{"no --config", []string{"register"}, []string{"--config is required", "Usage: driftback register --config app.yml"}},
		{"an argument besides the flags", []string{"register", "--config", noName, "extra"}, []string{`unexpected argument "extra"`, "Usage: driftback register"}},
		{"a config that does not exist", []string{"register", "--config", "/does/not/exist.yml"}, []string{"no such file"}},
		{"a manifest without a name", []string{"register", "--config", noName}, []string{"manifest.name: missing", "manifest.hook_attributes.url: missing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tc.args...)
			if code != exitError {
				t.Errorf("exit %d, want %d", code, exitError)
			}
			for _, s := range tc.says {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
}

// lines is a writer the test can watch while the command runs.
type lines struct {
	mu    sync.Mutex
	b     strings.Builder
	wrote chan struct{}
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRegisterCommand proves `driftback register` needs no key or secret,
// tells where to open the page, and exits 0 with the next steps on stdout once
// GitHub (the fake) sent the browser back.
func TestRegisterCommand(t *testing.T) {
	gh, err := githubfake.New()
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	dir := t.TempDir()
	config := filepath.Join(dir, "app.yml")
	y := "manifest:\n  name: driftback\n  url: https://example.com\n  hook_attributes:\n    url: https://example.com/webhook\n  default_events: [push]\n" +
		"github:\n  privateKeyFile: /does/not/exist.pem\n  webhookSecretFile: /does/not/exist\n  apiURL: " + gh.URL() + "api/v3/\n"
	if err := os.WriteFile(config, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "secrets")
	stdout, stderr := &lines{wrote: make(chan struct{}, 1)}, &lines{wrote: make(chan struct{}, 1)}
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"register", "--config", config, "--org", "acme", "--out", out, "--listen", "127.0.0.1:0"}, stdout, stderr)
	}()

	openLine := regexp.MustCompile(`Open (http://\S+) in a browser`)
	var page string
	for page == "" {
		select {
		case <-stderr.wrote:
			if m := openLine.FindStringSubmatch(stderr.String()); m != nil {
				page = m[1]
			}
		case c := <-code:
			t.Fatalf("exit %d before serving: %s", c, stderr.String())
		case <-time.After(time.Minute):
			t.Fatal("no page announced")
		}
	}

	resp, err := http.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	action := regexp.MustCompile(`action="([^"]+)"`).FindSubmatch(body)
	manifest := regexp.MustCompile(`name="manifest" value="([^"]+)"`).FindSubmatch(body)
	if action == nil || manifest == nil {
		t.Fatalf("no form on the page:\n%s", body)
	}
	// The client follows GitHub's redirect to the callback, as a browser does.
	resp, err = http.PostForm(html.UnescapeString(string(action[1])), url.Values{"manifest": {html.UnescapeString(string(manifest[1]))}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("callback: %s", resp.Status)
	}

	if c := <-code; c != exitOK {
		t.Fatalf("exit %d: %s", c, stderr.String())
	}
	apps := gh.RegisteredApps()
	if len(apps) != 1 || apps[0].Org != "acme" {
		t.Fatalf("registered %+v, want one App of acme", apps)
	}
	if !strings.Contains(stdout.String(), "appID: "+strconv.FormatInt(apps[0].ID, 10)) || strings.Contains(stdout.String(), apps[0].WebhookSecret) {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	if b, err := os.ReadFile(filepath.Join(out, "driftback.webhook-secret")); err != nil || string(b) != apps[0].WebhookSecret {
		t.Errorf("webhook secret file: %v", err)
	}
}
