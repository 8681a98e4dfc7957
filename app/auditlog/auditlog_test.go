package auditlog_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/driftback/driftback/app/auditlog"
	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/drift/audit"
	"github.com/driftback/driftback/internal/audittest"
)

const token = "audit-token-0123456789abcdef"

// shopObjects are the objects the tests' drift loop watches.
var shopObjects = []audit.Object{{Group: "apps", Resource: "deployments", Namespace: "shop", Name: "web"}, {Group: "apps", Resource: "deployments", Namespace: "shop", Name: "api"}}

func event(name string, at time.Time) string {
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/shop/deployments/%[1]s/scale?fieldManager=kubectl-scale","verb":"patch","user":{"username":"alice@example.com"},"userAgent":"kubectl/v1.37.2","objectRef":{"resource":"deployments","namespace":"shop","name":%[1]q,"apiGroup":"apps","apiVersion":"v1","subresource":"scale"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":%[2]q,"stageTimestamp":%[2]q}`,
		name, at.UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
}

func batch(events ...string) string {
	return `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` + strings.Join(events, ",") + `]}`
}

type counts struct {
	mu sync.Mutex
	n  map[string]int
	// most is the most events of an outcome counted at once.
	most map[string]int
	// said are the messages the receiver logged.
	said []string
}

// Handle keeps what the receiver logs: counts is its slog.Handler too.
func (c *counts) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.said = append(c.said, r.Message)
	return nil
}
func (c *counts) Enabled(context.Context, slog.Level) bool { return true }
func (c *counts) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *counts) WithGroup(string) slog.Handler            { return c }

// waitSaid waits until the receiver has logged msg: what it does at its
// own pace (find a file, read to its end) is waited for, not slept on.
func (c *counts) waitSaid(t *testing.T, msg string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		said := slices.Contains(c.said, msg)
		c.mu.Unlock()
		if said {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver did not say %q within a minute", msg)
		}
	}
}

// following is what the receiver logs once it has opened the file and read
// to its end.
const following = "following the audit log file"

func (c *counts) add(outcome string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.most = map[string]int{}, map[string]int{}
	}
	c.n[outcome] += n
	c.most[outcome] = max(c.most[outcome], n)
}

func (c *counts) get(outcome string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[outcome]
}

// TestTheEndpointReadsOnlyWhatIsAuthenticatedAndBounded: a batch with the
// token is read and kept; one without it, with another token, by another
// method, over the size bound or over the rate is refused unread, and
// counted; a body that is not audit events is refused.
func TestTheEndpointReadsOnlyWhatIsAuthenticatedAndBounded(t *testing.T) {
	c := &counts{}
	r := auditlog.New(config.Audit{Listen: ":0", Cluster: "prod", MaxBatchBytes: 4096, RequestsPerSecond: 1}, []byte(token), c.add, slog.New(slog.DiscardHandler))
	r.Note(shopObjects)
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	post := func(method, auth, body string) int {
		return audittest.Post(t, http.DefaultClient, method, srv.URL, auth, strings.NewReader(body))
	}
	now := time.Now()
	good := batch(event("web", now), event("api", now))
	for _, c := range []struct {
		method, auth, body string
		want               int
	}{
		{"POST", "", good, http.StatusUnauthorized},
		{"POST", "Bearer wrong-token-0123456789abcd", good, http.StatusUnauthorized},
		{"POST", "Basic " + token, good, http.StatusUnauthorized},
		{"GET", "Bearer " + token, "", http.StatusMethodNotAllowed},
		{"POST", "Bearer " + token, batch(strings.Repeat(event("web", now)+",", 40) + event("web", now)), http.StatusRequestEntityTooLarge},
	} {
		if got := post(c.method, c.auth, c.body); got != c.want {
			t.Errorf("%s %q: %d, want %d", c.method, c.auth, got, c.want)
		}
	}
	if r.Index.Len() != 0 {
		t.Fatalf("refused requests were read: %d events held", r.Index.Len())
	}
	time.Sleep(1100 * time.Millisecond) // the over-size request spent the rate's token
	if got := post("POST", "Bearer "+token, good); got != http.StatusOK {
		t.Fatalf("a good batch: %d", got)
	}
	if r.Index.Len() != 2 || c.get("received") != 2 || c.get("kept") != 2 {
		t.Errorf("held %d, counts %v", r.Index.Len(), c.n)
	}
	// The rate: a burst beyond it is refused.
	refused := 0
	for range 10 {
		if post("POST", "Bearer "+token, good) == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 {
		t.Error("10 batches at once were all read, over 1 a second")
	}
	time.Sleep(1100 * time.Millisecond)
	if got := post("POST", "Bearer "+token, "not json"); got != http.StatusBadRequest {
		t.Errorf("a body that is not events: %d", got)
	}
	if c.get("refused") < 6 {
		t.Errorf("refused counted %d", c.get("refused"))
	}
}

// TestALogFileIsFollowed: lines appended to the log backend's file are
// read as they are written (a line still being written waits for its
// end); what was there before is not read again; a rotated file is read
// from its start.
func TestALogFileIsFollowed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	now := time.Now()
	if err := os.WriteFile(path, []byte(event("old", now)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, c := follow(t, config.Audit{File: path, Cluster: "prod"}, 20*time.Millisecond)
	wait := func(n int) { t.Helper(); waitHeld(t, r, c, n) }
	line := event("web", now)
	appendFile(t, path, line[:40])
	time.Sleep(100 * time.Millisecond)
	if r.Index.Len() != 0 {
		t.Fatal("half a line was read")
	}
	appendFile(t, path, line[40:]+"\n")
	wait(1)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, event("api", now)+"\n")
	wait(2)
	if _, ok := r.Index.Attribute(audit.Object{Group: "apps", Resource: "deployments", Namespace: "shop", Name: "old"}, "kubectl-scale", "scale", now); ok {
		t.Error("a line written before it started was read")
	}
}

// TestClientCertificatesAuthenticate: with tls.clientCAFile and no token,
// a client with a certificate the CA signed is read; one without, or with
// another's, never reaches the handler.
func TestClientCertificatesAuthenticate(t *testing.T) {
	dir := t.TempDir()
	ca, caPEM, _ := audittest.Cert(t, "audit-ca", nil, false)
	_, srvPEM, srvKey := audittest.Cert(t, "driftback", &ca, true)
	client, _, _ := audittest.Cert(t, "kube-apiserver", &ca, false)
	other, _, _ := audittest.Cert(t, "other-ca", nil, false)
	stranger, _, _ := audittest.Cert(t, "stranger", &other, false)
	named, _, _ := audittest.Cert(t, "kube-apiserver-audit", &ca, false)
	cfg := config.Audit{Listen: "127.0.0.1:0", Cluster: "prod", TLS: tlsFiles(t, dir, srvPEM, srvKey, caPEM)}
	r, addr := serve(t, cfg, nil)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Leaf)
	if code, err := post(addr, roots, client); err != nil || code != http.StatusOK || r.Index.Len() != 1 {
		t.Errorf("the CA's client: %d %v, %d held", code, err, r.Index.Len())
	}
	for name, certs := range map[string][]tls.Certificate{"no certificate": nil, "another CA's": {stranger}} {
		if code, err := post(addr, roots, certs...); err == nil {
			t.Errorf("%s: served %d", name, code)
		}
	}
	if r.Index.Len() != 1 {
		t.Errorf("%d held after refused clients", r.Index.Len())
	}
	// With clientNames, only the named of the CA's clients are served.
	cfg.TLS.ClientNames = []string{"kube-apiserver-audit"}
	r, addr = serve(t, cfg, nil)
	if code, err := post(addr, roots, client); err == nil {
		t.Errorf("a client the CA signed, not named: served %d", code)
	}
	if code, err := post(addr, roots, named); err != nil || code != http.StatusOK || r.Index.Len() != 1 {
		t.Errorf("the named client: %d %v, %d held", code, err, r.Index.Len())
	}
}

// tlsFiles writes the endpoint's certificate, key and client CA.
func tlsFiles(t *testing.T, dir string, certPEM, keyPEM, caPEM []byte) config.AuditTLS {
	t.Helper()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return config.AuditTLS{CertFile: write("tls.crt", certPEM), KeyFile: write("tls.key", keyPEM), ClientCAFile: write("ca.crt", caPEM)}
}

// serve runs a receiver's endpoint as serve does; it returns its address.
func serve(t *testing.T, cfg config.Audit, tok []byte) (*auditlog.Receiver, string) {
	t.Helper()
	r := auditlog.New(cfg, tok, nil, slog.New(slog.DiscardHandler))
	r.Note(shopObjects)
	ln, err := r.Listen()
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r, ln.Addr().String()
}

// post sends a batch of one event to addr over TLS, with certs.
func post(addr string, roots *x509.CertPool, certs ...tls.Certificate) (int, error) {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
	resp, err := c.Post("https://"+addr, "application/json", strings.NewReader(batch(event("web", time.Now()))))
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestABatchGoesToTheReplicaRunningTheDriftLoop: the replicas share the
// apiserver's batches; one that does not run the cluster's drift loop
// carries what it is sent to the replica that does, which keeps it. The
// replica is trusted by the certificate it serves (every replica's):
// another server at its address is sent nothing. While no replica runs the
// loop, the apiserver is asked to send again.
func TestABatchGoesToTheReplicaRunningTheDriftLoop(t *testing.T) {
	dir := t.TempDir()
	ca, caPEM, _ := audittest.Cert(t, "audit-ca", nil, false)
	_, srvPEM, srvKey := audittest.Cert(t, "driftback", &ca, true)
	apiserver, _, _ := audittest.Cert(t, "kube-apiserver", &ca, false)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Leaf)
	for _, withToken := range []bool{false, true} {
		cfg := config.Audit{Listen: "127.0.0.1:0", Cluster: "prod", TLS: tlsFiles(t, dir, srvPEM, srvKey, caPEM)}
		var tok []byte
		if withToken {
			cfg.TLS.ClientCAFile, tok = "", []byte(token)
		}
		holder, holderAddr := serve(t, cfg, tok)
		other, otherAddr := serve(t, cfg, tok)
		var route atomic.Value
		route.Store(holderAddr)
		other.Route = func() (string, bool) { return route.Load().(string), false }
		holder.Route = func() (string, bool) { return "", true }
		send := func() int {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{apiserver}}}}
			auth := ""
			if withToken {
				auth = "Bearer " + token
			}
			return audittest.Post(t, c, "POST", "https://"+otherAddr, auth, strings.NewReader(batch(event("web", time.Now()))))
		}
		if code := send(); code != http.StatusOK || holder.Index.Len() != 1 || other.Index.Len() != 0 {
			t.Errorf("token %v: %d; the holder keeps %d, the other %d; want the holder to keep it", withToken, code, holder.Index.Len(), other.Index.Len())
		}
		// Another server at the address the Lease gives: not a replica.
		impostorCert, _, _ := audittest.Cert(t, "driftback", &ca, true)
		var reached atomic.Bool
		impostor := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Store(true) }))
		impostor.TLS = &tls.Config{Certificates: []tls.Certificate{impostorCert}}
		impostor.StartTLS()
		route.Store(strings.TrimPrefix(impostor.URL, "https://"))
		if code := send(); code != http.StatusServiceUnavailable || reached.Load() {
			t.Errorf("token %v: to a server with another certificate: %d, reached %v", withToken, code, reached.Load())
		}
		impostor.Close()
		// A batch another replica carried here is never carried on.
		route.Store(holderAddr)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{apiserver}}}}
		req, _ := http.NewRequest("POST", "https://"+otherAddr, strings.NewReader(batch(event("web", time.Now()))))
		req.Header.Set("Driftback-Forwarded", "1")
		if withToken {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusServiceUnavailable || holder.Index.Len() != 1 {
			t.Errorf("token %v: a carried batch at a replica not running the loop: %v %v, the holder keeps %d", withToken, resp, err, holder.Index.Len())
		} else {
			resp.Body.Close()
		}
		route.Store("")
		if code := send(); code != http.StatusServiceUnavailable {
			t.Errorf("token %v: with no replica running the loop: %d, want 503 (sent again)", withToken, code)
		}
	}
}

// TestALongLineCostsOnlyItself: a line over the bound is skipped to its
// end, the lines around it read; a file that is not there yet is waited
// for.
func TestALongLineCostsOnlyItself(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	r, c := follow(t, config.Audit{File: path, Cluster: "prod"}, 20*time.Millisecond)
	c.waitSaid(t, "the audit log file is not there yet: waiting for it")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.waitSaid(t, following)
	now := time.Now()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(event("web", now) + "\n" + `{"kind":"Event","x":"` + strings.Repeat("a", 2<<20) + `"}` + "\n" + event("api", now) + "\n")
	f.Close()
	deadline := time.Now().Add(5 * time.Second)
	for r.Index.Len() != 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if r.Index.Len() != 2 || c.get("refused") != 1 {
		t.Errorf("%d held, counts %v; want both short lines kept, the long one refused", r.Index.Len(), c.n)
	}
}

// readCounter is a request body that says whether it was read.
type readCounter struct {
	io.Reader
	read atomic.Bool
}

func (r *readCounter) Read(p []byte) (int, error) {
	r.read.Store(true)
	return r.Reader.Read(p)
}

// TestWhatIsRefusedIsNotRead: a request that is not authenticated is
// refused before a byte of its body is read; a body without a length
// (chunked) is cut at the bound; batches beyond those being read at once
// are asked to come again, so memory stays bounded however many arrive.
func TestWhatIsRefusedIsNotRead(t *testing.T) {
	c := &counts{}
	r := auditlog.New(config.Audit{Listen: ":0", Cluster: "prod", MaxBatchBytes: 4096, RequestsPerSecond: 1000}, []byte(token), c.add, slog.New(slog.DiscardHandler))
	r.Note(shopObjects)
	h := r.Handler()
	body := &readCounter{Reader: strings.NewReader(batch(event("web", time.Now())))}
	req := httptest.NewRequest("POST", "/", body)
	req.Header.Set("Authorization", "Bearer not-the-token-0123456789")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || body.read.Load() {
		t.Errorf("unauthenticated: %d, body read %v", rec.Code, body.read.Load())
	}

	srv := httptest.NewServer(h)
	defer srv.Close()
	send := func(body io.Reader) int {
		return audittest.Post(t, http.DefaultClient, "POST", srv.URL, "Bearer "+token, body)
	}
	// io.MultiReader hides the length: the body goes chunked.
	if code := send(io.MultiReader(strings.NewReader(batch(strings.Repeat(event("web", time.Now())+",", 20) + event("web", time.Now()))))); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body over the bound: %d", code)
	}
	// Batches that never end hold every place to read one.
	var writers []*io.PipeWriter
	defer func() {
		for _, w := range writers {
			w.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	hold := func() {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		go func() {
			req, _ := http.NewRequest("POST", srv.URL, pr)
			req.Header.Set("Authorization", "Bearer "+token)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		go pw.Write([]byte(`{"kind":"EventList",`))
	}
	for range 8 {
		hold()
	}
	// However slow the machine, such batches come to hold every place: a
	// batch read while one is free starts another that never ends (a
	// client's connection may end one: its place is free again), up to 16.
	busy, read := false, 0
	for deadline := time.Now().Add(time.Minute); !busy && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		busy = send(strings.NewReader(batch(event("web", time.Now())))) == http.StatusServiceUnavailable
		if !busy && read < 16 {
			read++
			hold()
		}
	}
	if !busy {
		t.Errorf("with every place taken by batches being read, another was read too (%d read)", read)
	}
}

// TestALogFileIsFollowedThroughRotation: lines written to a file just
// before it is rotated are read (the old file to its end, then the new
// one); a file truncated and written past where it was read (copytruncate)
// is read from its start; a poll that finds many lines reads them a batch
// at a time; a follower started in the middle of a line skips its rest
// without a complaint.
func TestALogFileIsFollowedThroughRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	now := time.Now()
	if err := os.WriteFile(path, []byte(event("old", now)+"\n"+event("old", now)[:30]), 0o600); err != nil {
		t.Fatal(err)
	}
	var names []audit.Object
	for i := range 40 {
		names = append(names, audit.Object{Group: "apps", Resource: "deployments", Namespace: "shop", Name: fmt.Sprintf("d%d", i)})
	}
	const poll = 500 * time.Millisecond
	// Room for about three lines a batch.
	r, c := follow(t, config.Audit{File: path, Cluster: "prod", MaxBatchBytes: int64(3 * len(event("web", now)))}, poll, names...)
	wait := func(n int) { t.Helper(); waitHeld(t, r, c, n) }
	appendFile(t, path, event("old", now)[30:]+"\n"+event("web", now)+"\n")
	wait(1)
	if c.get("refused") != 0 {
		t.Errorf("the rest of the line it started in was read as a bad line: %v", c.n)
	}
	// Just after a poll (it has read "web"): a line, the rotation and the
	// new file's first line, all before the next poll.
	appendFile(t, path, event("api", now)+"\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, event("d0", now)+"\n")
	wait(3)
	// copytruncate: emptied, then written past where it was read.
	var long strings.Builder
	for i := 1; i < 40; i++ {
		long.WriteString(event(fmt.Sprintf("d%d", i), now) + "\n")
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, long.String())
	wait(42)
	if c.get("received") != 42 || c.get("refused") != 0 {
		t.Errorf("counts %v; want 42 received, none refused", c.n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.most["received"] > 3 {
		t.Errorf("%d events read at once, over the batch bound (3)", c.most["received"])
	}
}

// appendFile appends s to the file at p, as a log backend writes.
func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// waitHeld waits until the receiver's index holds n events.
func waitHeld(t *testing.T, r *auditlog.Receiver, c *counts, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for r.Index.Len() != n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if r.Index.Len() != n {
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("%d events held, want %d (counts %v)", r.Index.Len(), n, c.n)
	}
}

// TestWhatCannotBeKeptYetIsSentAgain: a batch is answered 503, to be sent
// again, rather than taken and lost: before the drift loop has said which
// objects to keep, and when another replica carried it here and this one
// no longer runs the cluster's drift loop.
func TestWhatCannotBeKeptYetIsSentAgain(t *testing.T) {
	r := auditlog.New(config.Audit{Listen: ":0", Cluster: "prod", RequestsPerSecond: 1000}, []byte(token), nil, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	send := func(forwarded bool) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(batch(event("web", time.Now()))))
		req.Header.Set("Authorization", "Bearer "+token)
		if forwarded {
			req.Header.Set("Driftback-Forwarded", "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if code, after := send(false); code != http.StatusServiceUnavailable || after == "" {
		t.Errorf("before the drift loop noted its objects: %d, Retry-After %q", code, after)
	}
	r.Note(shopObjects)
	r.Route = func() (string, bool) { return "", false }
	// No replica to carry it to: refused before its body is read.
	body := &readCounter{Reader: strings.NewReader(batch(event("web", time.Now())))}
	req := httptest.NewRequest("POST", "/", body)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || body.read.Load() {
		t.Errorf("with no replica running the loop: %d, body read %v", rec.Code, body.read.Load())
	}
	if code, after := send(true); code != http.StatusServiceUnavailable || after == "" || r.Index.Len() != 0 {
		t.Errorf("carried to a replica that no longer runs the loop: %d, Retry-After %q, %d kept", code, after, r.Index.Len())
	}
	r.Route = func() (string, bool) { return "", true }
	if code, _ := send(true); code != http.StatusOK || r.Index.Len() != 1 {
		t.Errorf("carried to the one that does: %d, %d kept", code, r.Index.Len())
	}
}

// TestARenewedCertificateIsServed: the endpoint reads its certificate
// again when its files change (a renewed Secret), without a restart.
func TestARenewedCertificateIsServed(t *testing.T) {
	dir := t.TempDir()
	ca1, ca1PEM, _ := audittest.Cert(t, "ca-1", nil, false)
	_, cert1, key1 := audittest.Cert(t, "driftback", &ca1, true)
	files := tlsFiles(t, dir, cert1, key1, ca1PEM)
	files.ClientCAFile = ""
	_, addr := serve(t, config.Audit{Listen: "127.0.0.1:0", Cluster: "prod", TLS: files}, []byte(token))
	trusts := func(ca tls.Certificate) error {
		roots := x509.NewCertPool()
		roots.AddCert(ca.Leaf)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
		resp, err := c.Get("https://" + addr)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := trusts(ca1); err != nil {
		t.Fatal(err)
	}
	ca2, _, _ := audittest.Cert(t, "ca-2", nil, false)
	_, cert2, key2 := audittest.Cert(t, "driftback", &ca2, true)
	later := time.Now().Add(time.Minute)
	for f, b := range map[string][]byte{files.CertFile: cert2, files.KeyFile: key2} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if err := trusts(ca2); err != nil {
		t.Errorf("after the renewal: %v", err)
	}
}

// TestAFollowerStartedInALineIsNotStuck: a follower started in the middle
// of a line that is never finished reads what comes next: the new file
// when it is rotated, the file from its start when it is truncated.
func TestAFollowerStartedInALineIsNotStuck(t *testing.T) {
	now := time.Now()
	for _, truncated := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "audit.log")
		if err := os.WriteFile(path, []byte(event("old", now)+"\n"+event("web", now)[:40]), 0o600); err != nil {
			t.Fatal(err)
		}
		r, c := follow(t, config.Audit{File: path, Cluster: "prod"}, 20*time.Millisecond)
		var err error
		if truncated {
			err = os.Truncate(path, 0)
		} else {
			err = os.Rename(path, path+".1")
		}
		if err != nil {
			t.Fatal(err)
		}
		appendFile(t, path, event("api", now)+"\n"+event("web", now)+"\n")
		waitHeld(t, r, c, 2)
	}
}

// follow starts a receiver following cfg.File, keeping the events of the
// tests' objects and more, until the test ends; when the file is there, it
// returns once the receiver has read to its end.
func follow(t *testing.T, cfg config.Audit, poll time.Duration, more ...audit.Object) (*auditlog.Receiver, *counts) {
	t.Helper()
	c := &counts{}
	r := auditlog.New(cfg, nil, c.add, slog.New(c))
	r.Note(append(more, shopObjects...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	_, err := os.Stat(cfg.File)
	go func() { done <- r.Follow(ctx, poll) }()
	t.Cleanup(func() { cancel(); <-done })
	if err == nil {
		c.waitSaid(t, following) // what is written next is read
	}
	return r, c
}
