package app

import (
	"crypto/rand"
	"encoding/hex"
	"os"
)

// identity names this replica in the Lease: the pod's name, else the host's,
// with a random suffix so two processes on one host differ.
func identity() string {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname() // empty is fine: the suffix still tells replicas apart
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand does not fail on supported platforms
	return name + "-" + hex.EncodeToString(b)
}
