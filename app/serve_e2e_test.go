package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"sigs.k8s.io/yaml"

	"github.com/driftback/driftback/app/config"
)

// shippedConfig writes the repository's app.yml with only what ties it to
// this test changed: the GitHub fake, the test cluster as its "production"
// cluster, one target, the address and the cache folder. Every setting of the
// server (workers, queue, timeouts, the webhook body budget, the drift
// interval, leader election) is the shipped one.
func (w *world) shippedConfig(addr string) string {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "app.yml"))
	if err != nil {
		w.t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		w.t.Fatal(err)
	}
	secretFile := filepath.Join(w.dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(w.secret), 0o600); err != nil {
		w.t.Fatal(err)
	}
	gh := cfg["github"].(map[string]any)
	gh["appID"], gh["apiURL"] = w.gh.AppID, w.gh.URL()
	gh["privateKeyFile"], gh["webhookSecretFile"] = filepath.Join(w.dir, "key.pem"), secretFile
	server := cfg["server"].(map[string]any)
	server["listen"], server["cacheDir"] = addr, filepath.Join(w.dir, "serve-cache")
	le := server["leaderElection"].(map[string]any)
	if le["cluster"] != "production" {
		w.t.Fatalf("the shipped app.yml elects its leader on %v; this test names its cluster production", le["cluster"])
	}
	le["namespace"] = w.env.Namespace
	cfg["clusters"] = map[string]any{"production": map[string]any{"kubeconfig": filepath.Join(w.dir, "kubeconfig")}}
	cfg["targets"] = []any{map[string]any{"name": "prod", "repo": fullName, "path": "deploy/prod", "cluster": "production",
		"policy": map[string]any{"failOn": []any{"pvc-removal"}}}}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	file := filepath.Join(w.dir, "app.yml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		w.t.Fatal(err)
	}
	return file
}

// TestServeAsShipped runs driftback as `driftback serve --config app.yml`
// does, with the shipped app.yml's settings: it becomes ready holding its
// cluster's drift loop, a pull request gets its comment and its checks (the
// required one failing on a removed claim), the webhook refuses a chunked
// body over the cap and cuts off a slow unsigned sender at the shipped read
// timeout, and the end of its context (SIGTERM) stops it within its grace.
func TestServeAsShipped(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.stop() // the harness's own server: the product's serves instead
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	file := w.shippedConfig(addr)
	shipped, err := config.LoadConfig(file, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	w.url = "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, file, func(string) string { return "" }, 30*time.Second, w.logs.logger(t, slog.LevelWarn))
	}()

	get := func(path string) (int, string) {
		resp, err := http.Get(w.url + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var ready string
	eventually(t, func() bool {
		code, body := get("/readyz")
		ready = body
		return code == http.StatusOK && strings.Contains(body, "drift loop clusters held here: production")
	}, "serve to be ready and hold its cluster's drift loop", func() string { return ready })

	// A pull request that removes a claim: its comment, its target's check
	// and the required one, both failing.
	w.liveProd()
	base := w.commit(plumbing.ZeroHash, baseFiles)
	head := w.commit(base, map[string]any{"deploy/prod/kustomization.yaml": "namespace: NS\nresources:\n- ../base\n", "deploy/prod/data.yaml": nil})
	w.openPR(3, base, head, nil)
	if code := w.deliver("pull_request", "d-serve", prPayload("opened", 3, head.String())); code != http.StatusAccepted {
		t.Fatalf("a signed delivery: %d, want 202", code)
	}
	eventually(t, func() bool {
		done := 0
		for _, r := range w.gh.CheckRuns(fullName, head.String()) {
			if r.Status == "completed" {
				done++
			}
		}
		return done == 2 && len(w.gh.Comments(fullName, 3)) == 1
	}, "the comment and the two check runs")
	runs := w.gh.CheckRuns(fullName, head.String())
	if prod := findRun(t, runs, "driftback / prod"); prod.Conclusion != "failure" || !strings.Contains(prod.Title, "pvc-removal") {
		t.Errorf("prod check: %s %q", prod.Conclusion, prod.Title)
	}
	wantAggregate(t, runs, "failure")

	// A chunked body (no Content-Length) over the cap is refused, headers
	// as GitHub sends them or not.
	req, err := http.NewRequest(http.MethodPost, w.url+"/webhook", io.LimitReader(zeros{}, MaxWebhookBody+1))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "d-chunked")
	req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a chunked body over the cap: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body over the cap: %d, want 413", resp.StatusCode)
	}

	// A sender that stops after a byte is cut off at the shipped read
	// timeout, not held.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /webhook HTTP/1.1\r\nHost: %s\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: d-slow\r\nContent-Length: 1000\r\n\r\n{", addr)
	start := time.Now()
	if err := conn.SetReadDeadline(time.Now().Add(shipped.Server.ReadTimeout + e2eWait)); err != nil {
		t.Fatal(err)
	}
	answer, _ := bufio.NewReader(conn).ReadString('\n')
	if held := time.Since(start); held > shipped.Server.ReadTimeout+10*time.Second {
		t.Errorf("a slow sender was held %s, past the read timeout of %s (answer %q)", held, shipped.Server.ReadTimeout, answer)
	}

	cancel() // what SIGTERM does
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve stopped with %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop within its grace")
	}
	if code, _ := get("/healthz"); code != 0 {
		t.Errorf("/healthz answers %d after shutdown", code)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
