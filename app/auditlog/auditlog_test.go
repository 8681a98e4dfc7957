package auditlog_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/driftback/driftback/app/auditlog"
	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/drift/audit"
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
}

func (c *counts) add(outcome string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[outcome] += n
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
		req, err := http.NewRequest(method, srv.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
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
	c := &counts{}
	r := auditlog.New(config.Audit{File: path, Cluster: "prod"}, nil, c.add, slog.New(slog.DiscardHandler))
	r.Note(shopObjects)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Follow(ctx, 20*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond)
	appendTo := func(p, s string) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	wait := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for r.Index.Len() != n && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if r.Index.Len() != n {
			t.Fatalf("%d events held, want %d (counts %v)", r.Index.Len(), n, c.n)
		}
	}
	line := event("web", now)
	appendTo(path, line[:40])
	time.Sleep(100 * time.Millisecond)
	if r.Index.Len() != 0 {
		t.Fatal("half a line was read")
	}
	appendTo(path, line[40:]+"\n")
	wait(1)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(path, event("api", now)+"\n")
	wait(2)
	if _, ok := r.Index.Attribute(audit.Object{Group: "apps", Resource: "deployments", Namespace: "shop", Name: "old"}, "kubectl-scale", "scale", now); ok {
		t.Error("a line written before it started was read")
	}
}

// pair makes a certificate signed by ca (self-signed when ca is nil).
func pair(t *testing.T, cn string, ca *tls.Certificate, server bool) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
	} else if ca != nil {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	parent, signer := tmpl, any(key)
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	} else {
		parent, signer = ca.Leaf, ca.PrivateKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, certPEM
}

// TestClientCertificatesAuthenticate: with tls.clientCAFile and no token,
// a client with a certificate the CA signed is read; one without, or with
// another's, never reaches the handler.
func TestClientCertificatesAuthenticate(t *testing.T) {
	dir := t.TempDir()
	ca, caPEM := pair(t, "audit-ca", nil, false)
	srvCert, srvPEM := pair(t, "driftback", &ca, true)
	client, _ := pair(t, "kube-apiserver", &ca, false)
	other, _ := pair(t, "other-ca", nil, false)
	stranger, _ := pair(t, "stranger", &other, false)
	keyDER, err := x509.MarshalECPrivateKey(srvCert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := config.Audit{Listen: "127.0.0.1:0", Cluster: "prod", TLS: config.AuditTLS{CertFile: write("tls.crt", srvPEM),
		KeyFile: write("tls.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})), ClientCAFile: write("ca.crt", caPEM)}}
	r := auditlog.New(cfg, nil, nil, slog.New(slog.DiscardHandler))
	r.Note(shopObjects)
	ln, err := r.Listen()
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Leaf)
	post := func(certs ...tls.Certificate) (int, error) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
		resp, err := c.Post("https://"+ln.Addr().String(), "application/json", strings.NewReader(batch(event("web", time.Now()))))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(client); err != nil || code != http.StatusOK || r.Index.Len() != 1 {
		t.Errorf("the CA's client: %d %v, %d held", code, err, r.Index.Len())
	}
	for name, certs := range map[string][]tls.Certificate{"no certificate": nil, "another CA's": {stranger}} {
		if code, err := post(certs...); err == nil {
			t.Errorf("%s: served %d", name, code)
		}
	}
	if r.Index.Len() != 1 {
		t.Errorf("%d held after refused clients", r.Index.Len())
	}
}

// TestALongLineCostsOnlyItself: a line over the bound is skipped to its
// end, the lines around it read; a file that is not there yet is waited
// for.
func TestALongLineCostsOnlyItself(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	c := &counts{}
	r := auditlog.New(config.Audit{File: path, Cluster: "prod"}, nil, c.add, slog.New(slog.DiscardHandler))
	r.Note(shopObjects)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Follow(ctx, 20*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // not there yet
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // found, read from its end
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
