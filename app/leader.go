package app

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"strings"
)

// identity names this replica in the Lease: the pod's name, else the host's,
// with a random suffix so two processes on one host differ, and, when it
// serves audit events (auditPort), "@" the address the other replicas
// carry their share of them to: the pod's (POD_IP) and that port.
func identity(auditPort string) string {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname() // empty is fine: the suffix still tells replicas apart
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand does not fail on supported platforms
	id := name + "-" + hex.EncodeToString(b)
	if ip := net.ParseIP(os.Getenv("POD_IP")); ip != nil && auditPort != "" {
		id += "@" + net.JoinHostPort(ip.String(), auditPort)
	}
	return id
}

// replicaAddr is the audit endpoint a replica's identity gives; "" when
// none.
func replicaAddr(id string) string {
	i := strings.LastIndexByte(id, '@')
	if i < 0 {
		return ""
	}
	host, port, err := net.SplitHostPort(id[i+1:])
	if err != nil || net.ParseIP(host) == nil {
		return ""
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return ""
	}
	return net.JoinHostPort(host, port)
}

// auditRoute says where the audit cluster's events are attributed: in the
// replica running its drift loop. Each replica is handed a share of the
// apiserver's batches (its Service spreads them), and carries those of a
// cluster another replica holds to that replica's audit endpoint, at the
// address its identity gives.
func (s *Server) auditRoute() (string, bool) {
	sh := s.shards.Load()
	if sh == nil {
		return "", false // not yet looked at the Leases
	}
	id, here := sh.Holder(s.Audit.Cluster)
	if here {
		return "", true
	}
	return replicaAddr(id), false
}
