// Package auditlog takes a cluster's audit events into driftback: from the
// apiserver's webhook backend (an EventList a request, to Handler, on its
// own listener) or a log backend's file of JSON lines (Follow). Nothing is
// read from a request that is not authenticated, not a POST, over the rate
// or over the size bound; what is kept goes to an in-memory drift/audit
// index, bounded, never to disk.
package auditlog

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/drift/audit"
)

// Receiver reads one cluster's audit events into its index.
type Receiver struct {
	Index *audit.Index
	// Cluster names the cluster the events are of.
	Cluster string

	cfg   config.Audit
	token []byte
	// mu guards what the drift loop noted as watched, and addr.
	mu      sync.Mutex
	watched map[audit.Object]bool
	// hasNotes says the drift loop has noted a target's objects; started
	// is when the receiver was made.
	hasNotes bool
	started  time.Time
	addr     string
	limiter  *rate.Limiter
	count    func(outcome string, n int)
	log      *slog.Logger
	// busy holds a place for each batch being read: a bound on the
	// memory batches take at once.
	busy chan struct{}
	// peers carries batches to the replica that attributes them.
	peers *http.Client

	// Route says where the cluster's events are attributed: here (this
	// replica runs the cluster's drift loop), or at the audit endpoint of
	// the replica that does, at addr ("" while no replica holds it, as
	// during a hand-over). nil: here.
	Route func() (addr string, here bool)
}

// Defaults of config.Audit's bounds.
const (
	DefaultMaxBatchBytes = 8 << 20
	defaultRate          = 20
	// maxReading bounds the batches read at once: memory is at most
	// maxReading × MaxBatchBytes, however many requests come.
	maxReading = 4
)

// keyPair is the endpoint's certificate and key, read again when their
// files change (a renewed certificate, as cert-manager writes it into the
// Secret every replica mounts): every replica serves the same one, which
// is how the replicas know each other.
type keyPair struct {
	cert, key string
	// failed is told of a renewed pair that cannot be read (the one
	// read before is served meanwhile).
	failed func(error)

	mu     sync.Mutex
	loaded *tls.Certificate
	mtimes [2]time.Time
}

// get returns the key pair as its files now hold it; while they cannot be
// read (a Secret being updated), the one read before.
func (k *keyPair) get() (*tls.Certificate, error) {
	ci, cerr := os.Stat(k.cert)
	ki, kerr := os.Stat(k.key)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.loaded != nil && (cerr != nil || kerr != nil || ci.ModTime().Equal(k.mtimes[0]) && ki.ModTime().Equal(k.mtimes[1])) {
		return k.loaded, nil
	}
	if cerr == nil && kerr == nil {
		k.mtimes = [2]time.Time{ci.ModTime(), ki.ModTime()} // a pair that fails is not read again until it changes
	}
	pair, err := tls.LoadX509KeyPair(k.cert, k.key)
	if err != nil {
		if k.loaded != nil {
			if k.failed != nil {
				k.failed(err)
			}
			return k.loaded, nil
		}
		return nil, err
	}
	k.loaded = &pair
	return k.loaded, nil
}

// MaxConns bounds the endpoint's connections: the apiserver's webhook
// backend holds one or a few, each other replica one.
const MaxConns = 64

// forwarded marks a batch one replica carries to another: the one that
// receives it keeps it, never carries it on.
const forwarded = "Driftback-Forwarded"

// New returns the receiver app.yml's audit section configures; count is
// told what happened to the events (metrics). It keeps the events of the
// objects the drift loop notes (Note).
func New(cfg config.Audit, token []byte, count func(string, int), log *slog.Logger) *Receiver {
	if cfg.MaxBatchBytes == 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.RequestsPerSecond == 0 {
		cfg.RequestsPerSecond = defaultRate
	}
	if count == nil {
		count = func(string, int) {}
	}
	r := &Receiver{Cluster: cfg.Cluster, cfg: cfg, token: token, limiter: rate.NewLimiter(rate.Limit(cfg.RequestsPerSecond), int(2*cfg.RequestsPerSecond)+1), count: count, log: log,
		watched: map[audit.Object]bool{}, busy: make(chan struct{}, maxReading), started: time.Now()}
	r.Index = audit.NewIndex(audit.Options{Retention: cfg.Retention, MaxEvents: cfg.MaxEvents, Keep: r.keeps})
	return r
}

// Note records the objects a target renders: their events are kept, no
// other's (an object's routine writers, a Lease's renewals, cost the index
// nothing).
func (r *Receiver) Note(objects []audit.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hasNotes = true
	for _, o := range objects {
		r.watched[o] = true
	}
}

// noted says the drift loop has said which objects to keep.
// Past notedWait, batches are taken whatever was noted: a cluster whose
// targets do not render is not refused for ever.
func (r *Receiver) noted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hasNotes || time.Since(r.started) > notedWait
}

// notedWait is how long batches wait for the drift loop's first notes.
const notedWait = 2 * time.Minute

// keeps says an event's object is one the drift loop watches.
func (r *Receiver) keeps(o audit.Object) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.watched[o]
}

// Identities are the configured map from cluster users to GitHub logins.
func (r *Receiver) Identities() audit.Identities {
	return audit.Identities{Users: r.cfg.Identities.Users, Prefix: r.cfg.Identities.Prefix}
}

// Listen listens on the configured address, over TLS when configured
// (requiring a client certificate the configured CA signed, when given).
func (r *Receiver) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", r.cfg.Listen)
	if err != nil {
		return nil, err
	}
	// Bounded in connections below TLS: what is served above it is still
	// a TLS connection (a request's TLS state, its client certificate).
	ln = netutil.LimitListener(ln, MaxConns)
	r.mu.Lock()
	r.addr = ln.Addr().String()
	r.mu.Unlock()
	if r.cfg.TLS.CertFile == "" {
		return ln, nil
	}
	tc, err := r.serverTLS()
	if err != nil {
		ln.Close()
		return nil, err
	}
	return tls.NewListener(ln, tc), nil
}

// Addr is where Listen listens; "" before.
func (r *Receiver) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

// serverTLS is the endpoint's TLS: its certificate and, with a client CA,
// the clients it serves: those with a certificate the CA signed (with one
// of clientNames, when given), and the other replicas, which present the
// endpoint's own certificate. It readies the client that carries batches
// to another replica, which trusts only a peer serving that certificate.
func (r *Receiver) serverTLS() (*tls.Config, error) {
	files := &keyPair{cert: r.cfg.TLS.CertFile, key: r.cfg.TLS.KeyFile, failed: func(err error) {
		r.log.Warn("the audit endpoint's renewed certificate cannot be read: the one before is served", "err", err)
	}}
	if _, err := files.get(); err != nil {
		return nil, fmt.Errorf("audit.tls: %w", err)
	}
	isReplica := func(raw [][]byte) bool {
		own, err := files.get()
		return err == nil && len(raw) > 0 && bytes.Equal(raw[0], own.Certificate[0])
	}
	r.peers = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return files.get() },
		// A replica is reached by its pod's address, which no certificate
		// names: it is trusted by the certificate it serves, pinned.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if !isReplica(raw) {
				return errors.New("the peer does not serve the audit endpoint's certificate")
			}
			return nil
		},
	}}}
	// Without session tickets, every connection's certificate is checked
	// (a resumed session skips VerifyPeerCertificate).
	tc := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return files.get() },
		MinVersion: tls.VersionTLS12, SessionTicketsDisabled: true}
	if r.cfg.TLS.ClientCAFile == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(r.cfg.TLS.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("audit.tls.clientCAFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("audit.tls.clientCAFile %s: no certificate in it", r.cfg.TLS.ClientCAFile)
	}
	tc.ClientAuth = tls.RequireAnyClientCert
	tc.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if isReplica(raw) {
			return nil
		}
		certs := make([]*x509.Certificate, 0, len(raw))
		for _, der := range raw {
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return err
			}
			certs = append(certs, c)
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return err
		}
		if names := r.cfg.TLS.ClientNames; len(names) > 0 && !slices.Contains(names, certs[0].Subject.CommonName) &&
			!slices.ContainsFunc(certs[0].DNSNames, func(n string) bool { return slices.Contains(names, n) }) {
			return fmt.Errorf("the client certificate of %q is not one of audit.tls.clientNames", certs[0].Subject.CommonName)
		}
		return nil
	}
	return tc, nil
}

// Handler takes the webhook backend's batches.
func (r *Receiver) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		refuse := func(code int, why string) {
			r.count("refused", 1)
			http.Error(w, why, code)
		}
		if req.Method != http.MethodPost {
			refuse(http.StatusMethodNotAllowed, "POST audit events")
			return
		}
		if !r.authenticated(req) {
			refuse(http.StatusUnauthorized, "not authenticated")
			return
		}
		if !r.limiter.Allow() {
			refuse(http.StatusTooManyRequests, "too many requests")
			return
		}
		if req.ContentLength > r.cfg.MaxBatchBytes {
			refuse(http.StatusRequestEntityTooLarge, "over the batch bound")
			return
		}
		addr, here := "", true
		if r.Route != nil {
			addr, here = r.Route()
		}
		switch {
		case !here && req.Header.Get(forwarded) != "":
			// Carried by a replica that took this one for the one
			// running the drift loop: it no longer is (a hand-over).
			r.again(w, "this replica does not run the cluster's drift loop")
			return
		case !here && (addr == "" || r.peers == nil):
			r.again(w, "no replica runs this cluster's drift loop yet")
			return
		case here && !r.noted():
			// Until the drift loop has rendered the cluster's targets,
			// which objects to keep is not known: sent again, not lost.
			r.again(w, "the cluster's targets are not rendered yet")
			return
		}
		select {
		case r.busy <- struct{}{}:
			defer func() { <-r.busy }()
		default:
			w.Header().Set("Retry-After", "1")
			refuse(http.StatusServiceUnavailable, "busy reading other batches")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBatchBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				refuse(http.StatusRequestEntityTooLarge, "over the batch bound")
				return
			}
			refuse(http.StatusBadRequest, "the batch was not read whole")
			return
		}
		if !here {
			r.forward(w, req, addr, body)
			return
		}
		events, err := audit.DecodeList(bytes.NewReader(body))
		if err != nil {
			refuse(http.StatusBadRequest, "not audit events")
			return
		}
		r.add(events)
		w.WriteHeader(http.StatusOK)
	})
}

// forward carries a batch to the replica that runs the cluster's drift
// loop, with the request's own credentials, and answers as it does; while
// no replica runs it, or the one that does cannot be reached, the
// apiserver is asked to send the batch again (its webhook backend retries
// with a back-off).
func (r *Receiver) forward(w http.ResponseWriter, req *http.Request, addr string, body []byte) {
	retry := func(why string) { r.again(w, why) }
	if addr == "" || r.peers == nil {
		retry("no replica runs this cluster's drift loop yet")
		return
	}
	out, err := http.NewRequestWithContext(req.Context(), http.MethodPost, "https://"+addr+"/", bytes.NewReader(body))
	if err != nil {
		retry("the replica that attributes these events cannot be reached")
		return
	}
	out.Header.Set("Content-Type", "application/json")
	out.Header.Set(forwarded, "1")
	if a := req.Header.Get("Authorization"); a != "" {
		out.Header.Set("Authorization", a)
	}
	resp, err := r.peers.Do(out)
	if err != nil {
		r.log.Warn("cannot carry audit events to the replica that attributes them", "addr", addr, "err", err)
		retry("the replica that attributes these events cannot be reached")
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	if resp.StatusCode/100 == 2 {
		r.count("forwarded", 1) // what the peer refused, it counts
	}
	w.WriteHeader(resp.StatusCode)
}

// again refuses a batch for now: the apiserver's webhook backend sends it
// again after Retry-After (with its back-off), so it is not lost.
func (r *Receiver) again(w http.ResponseWriter, why string) {
	r.count("refused", 1)
	w.Header().Set("Retry-After", "5")
	http.Error(w, why, http.StatusServiceUnavailable)
}

// authenticated says the request carries the token (compared in constant
// time) or, with no token configured, came over a verified client
// certificate; nothing else is read.
func (r *Receiver) authenticated(req *http.Request) bool {
	if len(r.token) > 0 {
		got, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		return ok && subtle.ConstantTimeCompare([]byte(got), r.token) == 1
	}
	// The handshake verified the certificate (serverTLS).
	return r.cfg.TLS.ClientCAFile != "" && req.TLS != nil && len(req.TLS.PeerCertificates) > 0
}

func (r *Receiver) add(events []auditv1.Event) {
	c := r.Index.Add(events, time.Now())
	r.count("received", len(events))
	r.count("kept", c.Kept)
	r.count("dropped", c.Dropped)
}

// Follow reads the configured file's JSON lines as they are written, from
// its end (what was there before is not read again), until ctx ends. A
// rotated file is read to its end, then the new one from its start; a
// truncated one (copytruncate) from its start. Lines are read and kept a
// batch (MaxBatchBytes) at a time, whatever a poll finds.
func (r *Receiver) Follow(ctx context.Context, poll time.Duration) error {
	if r.cfg.File == "" {
		return nil
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	// A file not there yet (a log shipper that has not started) is
	// waited for, said once; once there, it is read from its end.
	f, err := os.Open(r.cfg.File)
	for said := false; err != nil; f, err = os.Open(r.cfg.File) {
		if !said {
			r.log.Warn("the audit log file is not there yet: waiting for it", "file", r.cfg.File, "err", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	defer func() { f.Close() }()
	offset, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("audit.file: %w", err)
	}
	r.log.Info("following the audit log file", "file", r.cfg.File, "from", offset)
	// Started in the middle of a line: its rest is not an event.
	partial := !atLineStart(f, offset)
	head := readHead(f, min(offset, headSize))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if info, err := os.Stat(r.cfg.File); err == nil {
			if cur, err := f.Stat(); err == nil && !os.SameFile(info, cur) {
				// Rotated: what was written to the old file since the
				// last poll, then the new file from its start.
				if partial {
					if end, ok := lineEnd(f, offset); ok {
						offset, partial = end, false
					}
				}
				if !partial {
					offset = r.drain(f, offset)
				}
				if nf, err := os.Open(r.cfg.File); err == nil {
					f.Close()
					f, offset, head, partial = nf, 0, nil, false
				}
			} else if err == nil && (cur.Size() < offset || !bytes.Equal(readHead(f, int64(len(head))), head)) {
				// Truncated, and perhaps written again past where it
				// was read (its first bytes are not those read): from
				// its start.
				offset, head, partial = 0, nil, false
			}
		}
		if partial {
			end, ok := lineEnd(f, offset)
			if !ok {
				continue
			}
			offset, partial = end, false
		}
		offset = r.drain(f, offset)
		if len(head) < headSize {
			head = readHead(f, min(offset, headSize))
		}
	}
}

// drain reads the file's whole lines from offset to its end (past any
// line over the bound) and returns where it stopped.
func (r *Receiver) drain(f *os.File, offset int64) int64 {
	for {
		next := r.readLines(f, offset)
		if next == offset {
			return offset
		}
		offset = next
	}
}

// headSize is how much of a followed file's start is remembered: enough
// to hold the first event's auditID, which no other event shares.
const headSize = 512

// readHead reads a file's first n bytes.
func readHead(f *os.File, n int64) []byte {
	b := make([]byte, n)
	m, _ := f.ReadAt(b, 0)
	return b[:m]
}

// atLineStart says offset is the start of a file or of a line in it: the
// byte before it is a newline.
func atLineStart(f *os.File, offset int64) bool {
	if offset == 0 {
		return true
	}
	b := make([]byte, 1)
	n, _ := f.ReadAt(b, offset-1)
	return n == 1 && b[0] == '\n'
}

// readLines keeps the events of the whole lines from offset on, a batch at
// a time, and returns the offset after the last whole line: a line still
// being written is read again next time; a line over the bound is skipped
// to its end, once it has one.
func (r *Receiver) readLines(f *os.File, offset int64) int64 {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset
	}
	var batch bytes.Buffer
	flush := func() {
		if batch.Len() == 0 {
			return
		}
		events, bad := audit.DecodeLines(&batch)
		if bad > 0 {
			r.count("refused", bad)
			r.log.Warn("audit log lines that are not audit events were skipped", "file", r.cfg.File, "lines", bad)
		}
		r.add(events)
		batch.Reset()
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), audit.MaxLine)
	sc.Split(scanLines)
	for sc.Scan() {
		line := sc.Bytes()
		if line[len(line)-1] != '\n' {
			break // still being written: read again next time
		}
		if int64(batch.Len()+len(line)) > r.cfg.MaxBatchBytes {
			flush()
		}
		offset += int64(len(line))
		batch.Write(line)
	}
	if err := sc.Err(); err != nil {
		flush()
		if end, ok := lineEnd(f, offset); ok {
			r.log.Warn("an audit log line over the bound was skipped", "file", r.cfg.File, "bytes", end-offset)
			r.count("refused", 1)
			offset = end
		}
	}
	flush()
	return offset
}

// lineEnd is the offset just past the newline that ends the line at
// offset; ok is false while the line has no end yet.
func lineEnd(f *os.File, offset int64) (int64, bool) {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, false
	}
	br := bufio.NewReader(f)
	for n := offset; ; {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		if err == nil {
			return n, true
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return 0, false
		}
	}
}

// scanLines splits at newlines, keeping them, so a line still being
// written (no newline yet) is told apart.
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
