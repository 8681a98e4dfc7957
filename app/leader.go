package app

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strings"
)

// identity names this replica in the Lease: the pod's name, else the host's,
// with a random suffix so two processes on one host differ, and "@" the
// pod's address (POD_IP), where the other replicas reach its audit
// endpoint.
func identity() string {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname() // empty is fine: the suffix still tells replicas apart
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand does not fail on supported platforms
	id := name + "-" + hex.EncodeToString(b)
	if ip := net.ParseIP(os.Getenv("POD_IP")); ip != nil {
		id += "@" + ip.String()
	}
	return id
}

// replicaIP is the address a replica's identity gives; "" when none.
func replicaIP(id string) string {
	i := strings.LastIndexByte(id, '@')
	if i < 0 {
		return ""
	}
	if ip := net.ParseIP(id[i+1:]); ip != nil {
		return ip.String()
	}
	return ""
}

// auditRoute says where the audit cluster's events are attributed: in the
// replica running its drift loop. Each replica is handed a share of the
// apiserver's batches (its Service spreads them), and carries those of a
// cluster another replica holds to that replica's audit endpoint, at the
// address its identity gives, on the same port.
func (s *Server) auditRoute(port string) func() (string, bool) {
	return func() (string, bool) {
		sh := s.shards.Load()
		if sh == nil {
			return "", false // not yet looked at the Leases
		}
		id, here := sh.Holder(s.Audit.Cluster)
		if here {
			return "", true
		}
		ip := replicaIP(id)
		if ip == "" {
			return "", false
		}
		return net.JoinHostPort(ip, port), false
	}
}
