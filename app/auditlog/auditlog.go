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
	"strings"
	"sync"
	"time"

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
	// mu guards what the drift loop noted as watched.
	mu      sync.Mutex
	watched map[audit.Object]bool
	limiter *rate.Limiter
	count   func(outcome string, n int)
	log     *slog.Logger
}

// Defaults of config.Audit's bounds.
const (
	DefaultMaxBatchBytes = 8 << 20
	defaultRate          = 20
)

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
		watched: map[audit.Object]bool{}}
	r.Index = audit.NewIndex(audit.Options{Retention: cfg.Retention, MaxEvents: cfg.MaxEvents, Keep: r.keeps})
	return r
}

// Note records the objects a target renders: their events are kept, no
// other's (an object's routine writers, a Lease's renewals, cost the index
// nothing).
func (r *Receiver) Note(objects []audit.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range objects {
		r.watched[o] = true
	}
}

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
	if err != nil || r.cfg.TLS.CertFile == "" {
		return ln, err
	}
	cert, err := tls.LoadX509KeyPair(r.cfg.TLS.CertFile, r.cfg.TLS.KeyFile)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("audit.tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if r.cfg.TLS.ClientCAFile != "" {
		pem, err := os.ReadFile(r.cfg.TLS.ClientCAFile)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("audit.tls.clientCAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			ln.Close()
			return nil, fmt.Errorf("audit.tls.clientCAFile %s: no certificate in it", r.cfg.TLS.ClientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tls.NewListener(ln, tc), nil
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
		events, err := audit.DecodeList(http.MaxBytesReader(w, req.Body, r.cfg.MaxBatchBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				refuse(http.StatusRequestEntityTooLarge, "over the batch bound")
				return
			}
			refuse(http.StatusBadRequest, "not audit events")
			return
		}
		r.add(events)
		w.WriteHeader(http.StatusOK)
	})
}

// authenticated says the request carries the token (compared in constant
// time) or, with no token configured, came over a verified client
// certificate; nothing else is read.
func (r *Receiver) authenticated(req *http.Request) bool {
	if len(r.token) > 0 {
		got, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		return ok && subtle.ConstantTimeCompare([]byte(got), r.token) == 1
	}
	return r.cfg.TLS.ClientCAFile != "" && req.TLS != nil && len(req.TLS.VerifiedChains) > 0
}

func (r *Receiver) add(events []auditv1.Event) {
	c := r.Index.Add(events, time.Now())
	r.count("received", len(events))
	r.count("kept", c.Kept)
	r.count("dropped", c.Dropped)
}

// Follow reads the configured file's JSON lines as they are written, from
// its end (what was there before is not read again), until ctx ends; a
// rotated or truncated file is read again from its start.
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
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if info, err := os.Stat(r.cfg.File); err == nil {
			if cur, err := f.Stat(); err == nil && (!os.SameFile(info, cur) || info.Size() < offset) {
				// Rotated or truncated: the new file from its start.
				if nf, err := os.Open(r.cfg.File); err == nil {
					f.Close()
					f, offset = nf, 0
				}
			}
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), audit.MaxLine)
		sc.Split(scanLines)
		var batch bytes.Buffer
		for sc.Scan() {
			line := sc.Bytes()
			if line[len(line)-1] != '\n' {
				break // still being written: read again next time
			}
			offset += int64(len(line))
			batch.Write(line)
		}
		if err := sc.Err(); err != nil {
			// A line over the bound: skipped to its end, once it has one;
			// the lines after it are read next time.
			if end, ok := lineEnd(f, offset); ok {
				r.log.Warn("an audit log line over the bound was skipped", "file", r.cfg.File, "bytes", end-offset)
				r.count("refused", 1)
				offset = end
			}
		}
		if batch.Len() == 0 {
			continue
		}
		events, bad := audit.DecodeLines(&batch)
		if bad > 0 {
			r.count("refused", bad)
			r.log.Warn("audit log lines that are not audit events were skipped", "file", r.cfg.File, "lines", bad)
		}
		r.add(events)
	}
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
