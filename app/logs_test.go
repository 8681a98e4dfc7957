package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// logCapture keeps every log line a test's servers and drift loops write, at
// every level, so the test can prove no secret is among them.
type logCapture struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	canaries []string
	// later are canaries known only when the test ends: the installation
	// tokens and JWTs a run made.
	later []func() []string
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// logger writes to the test's log at level and to the capture at every
// level.
func (c *logCapture) logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(teeHandler{
		slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}),
		slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}),
	})
}

// secret adds a value that must never be logged: as it is, base64-encoded
// as the API returns Secret data, and line by line (a PEM key logged with
// escaped newlines still shows each line).
func (c *logCapture) secret(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.canaries = append(c.canaries, v, base64.StdEncoding.EncodeToString([]byte(v)))
	for _, line := range strings.Split(v, "\n") {
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			c.canaries = append(c.canaries, line)
		}
	}
}

// count counts the log lines holding s.
func (c *logCapture) count(s string) int { return len(c.lines(s)) }

// lines are the log lines holding s.
func (c *logCapture) lines(s string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range strings.Split(c.buf.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// secretsFrom adds the values f returns when the logs are checked.
func (c *logCapture) secretsFrom(f func() []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.later = append(c.later, f)
}

// leaked returns the secrets found in the logs.
func (c *logCapture) leaked() []string {
	c.mu.Lock()
	later := c.later
	c.mu.Unlock()
	for _, f := range later {
		for _, v := range f() {
			c.secret(v)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	logs := c.buf.String()
	var out []string
	for _, s := range c.canaries {
		if strings.Contains(logs, s) {
			out = append(out, s)
		}
	}
	return out
}

// check fails the test for every secret found in the logs.
func (c *logCapture) check(t testing.TB) {
	for _, s := range c.leaked() {
		t.Errorf("a secret appears in the logs: %.24q…", s)
	}
}

// TestLogCaptureFindsSecrets proves the capture the end-to-end tests rely on
// finds a secret logged at any level, as it is, base64-encoded, or one line
// of a PEM key logged with escaped newlines.
func TestLogCaptureFindsSecrets(t *testing.T) {
	const pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nQ2FuYXJ5UEVNbGluZTJjYW5hcnlQRU1s\n-----END PRIVATE KEY-----\n"
	for _, logged := range []any{"plain-canary-value", base64.StdEncoding.EncodeToString([]byte("plain-canary-value")), pem} {
		c := &logCapture{}
		c.secret("plain-canary-value")
		c.secret(pem)
		c.logger(t, slog.LevelError).Debug("working", "value", logged)
		if len(c.leaked()) == 0 {
			t.Errorf("a logged secret (%.20q…) was not found", logged)
		}
	}
	// An installation token issued during the run, logged at debug level.
	late := &logCapture{}
	var issued []string
	late.secretsFrom(func() []string { return issued })
	late.logger(t, slog.LevelError).Debug("calling GitHub", "authorization", "token ghs_c4n4ryInstallationToken")
	issued = append(issued, "ghs_c4n4ryInstallationToken")
	if len(late.leaked()) == 0 {
		t.Error("a token known only at the end of the run was not found in the logs")
	}
	c := &logCapture{}
	c.secret("plain-canary-value")
	c.logger(t, slog.LevelError).Info("nothing secret here")
	if got := c.leaked(); len(got) != 0 {
		t.Errorf("found %q in logs without it", got)
	}
}

type teeHandler []slog.Handler

func (h teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	for _, x := range h {
		if x.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, x := range h {
		if x.Enabled(ctx, r.Level) {
			if err := x.Handle(ctx, r.Clone()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make(teeHandler, len(h))
	for i, x := range h {
		out[i] = x.WithAttrs(as)
	}
	return out
}

func (h teeHandler) WithGroup(name string) slog.Handler {
	out := make(teeHandler, len(h))
	for i, x := range h {
		out[i] = x.WithGroup(name)
	}
	return out
}
