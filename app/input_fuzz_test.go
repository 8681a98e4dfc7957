package app

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/app/queue"

	"github.com/driftback/driftback/app/config"
)

// FuzzWebhookRouting: any signed body under any event name is answered with
// one of the intake's statuses, never a panic.
func FuzzWebhookRouting(f *testing.F) {
	for _, e := range []struct{ event, body string }{
		{"pull_request", `{"action":"opened","number":1,"pull_request":{"head":{"sha":"abc"}},"repository":{"name":"r","full_name":"o/r","owner":{"login":"o"}},"installation":{"id":1}}`},
		{"issue_comment", `{"action":"created","issue":{"number":1,"pull_request":{"url":"x"}},"comment":{"body":"/driftback diff","user":{"login":"u"}},"repository":{"full_name":"o/r"}}`},
		{"push", `{"ref":"refs/heads/main","repository":{"full_name":"o/r","default_branch":"main"}}`},
		{"check_run", `{"action":"rerequested","check_run":{"name":"driftback / x","head_sha":"abc"}}`},
		{"installation", `{"action":"deleted","installation":{"id":1}}`},
		{"pull_request", `{"pull_request":null}`},
		{"pull_request", `[]`},
		{"star", `{}`},
	} {
		f.Add(e.event, []byte(e.body))
	}
	cfg, err := config.ParseConfig([]byte("targets:\n- repo: o/r\n  path: p\n  cluster: c\nclusters:\n  c:\n    kubeconfig: /nonexistent\n"), func(string) string { return "" })
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := NewApp(cfg, ghapp.NewClients(1, nil, "http://127.0.0.1:1/", ghapp.RetryPolicy{Attempts: 1}), nil, discard)
	q := queue.New(ctx, 0, 1<<20, time.Second, discard, nil) // no workers: routing only
	h := NewWebhook([]byte(testSecret), q, a, discard)
	n := 0
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		n++
		req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", "fuzz-"+strings.Repeat("x", n%7)+string(rune('a'+n%26))+time.Now().Format(time.RFC3339Nano))
		req.Header.Set("X-Hub-Signature-256", signed(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusAccepted, http.StatusNoContent, http.StatusBadRequest, http.StatusServiceUnavailable, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("%s: status %d", event, rec.Code)
		}
	})
}
