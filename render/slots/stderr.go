package slots

import (
	"bytes"
	"io"
	"regexp"
	"sync"
)

// NewStderr keeps max bytes of a child's stderr at its start and as many
// at its end, and the line that says why it died.
func NewStderr(max int) *Stderr { return &Stderr{max: max} }

// Stderr keeps the first and the last few KiB a child writes to its
// stderr: a Go crash names its cause first, then prints stacks of any
// length. The first line that says why it died is kept wherever it falls.
type Stderr struct {
	mu   sync.Mutex
	max  int
	head []byte
	tail bytes.Buffer
	// cause is the first line saying why the child died, wherever it is.
	cause, carry []byte
}

// crashCause matches a line that says why a child died.
var crashCause = regexp.MustCompile(`out of memory|cannot allocate memory|failed to allocate|stack exceeds|fatal error|panic:|ERROR:|ThreadSanitizer`)

func (b *Stderr) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if b.cause == nil {
		b.carry = append(b.carry, p...)
		for i := bytes.IndexByte(b.carry, '\n'); i >= 0 && b.cause == nil; i = bytes.IndexByte(b.carry, '\n') {
			if crashCause.Match(b.carry[:i]) {
				b.cause = bytes.Clone(b.carry[:i])
			}
			b.carry = b.carry[i+1:]
		}
		b.carry = b.carry[max(0, len(b.carry)-b.max):] // a longer line names no cause
	}
	if room := b.max - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	b.tail.Write(p)
	if over := b.tail.Len() - b.max; over > 0 {
		b.tail.Next(over)
	}
	return n, nil
}

func (b *Stderr) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cause != nil && !bytes.Contains(b.head, b.cause) {
		return string(b.cause) + "\n" + string(b.head) + b.tail.String()
	}
	return string(b.head) + b.tail.String()
}

var _ io.Writer = (*Stderr)(nil)
