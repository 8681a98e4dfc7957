// Package slots bounds the render children of a process by the container's
// memory: how many run at once, and how much memory each may have; and
// the limits a child puts on itself (memory, CPU, no file written).
package slots

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The render children's memory comes out of the container's. With a child
// per core and 2 GiB each, a hostile overlay on a 2-core pod could take 4 GiB
// and have the whole pod OOM-killed, when it should only fail its own render.
// So where the container has a memory limit, the children together get at
// most childShare of it, and no more children run than can each have
// minChildMemory.
const (
	childShare     = 2 // the children get 1/childShare of the container's limit
	minChildMemory = 512 << 20
)

// cgroupMemoryFiles hold the container's memory limit: cgroup v2, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// MemoryLimitEnv names the memory driftback's container may use, in bytes or
// as a Kubernetes quantity (3Gi). deploy/ sets it from the pod's
// limits.memory (the Downward API), so the render children fit the pod where
// the cgroup files cannot be read; it wins over them when set.
const MemoryLimitEnv = "DRIFTBACK_MEMORY_LIMIT"

// ContainerMemory returns the memory limit of the container driftback runs
// in (MemoryLimitEnv, else its cgroup's), or 0 when there is none.
func ContainerMemory() int64 {
	if v := strings.TrimSpace(os.Getenv(MemoryLimitEnv)); v != "" {
		if q, err := resource.ParseQuantity(v); err == nil && q.Value() > 0 {
			return q.Value()
		}
	}
	return containerMemory(cgroupMemoryFiles)
}

func containerMemory(files []string) int64 {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 reports "no limit" as a huge page-rounded number.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}

// Fit bounds the children by the container's memory limit (0: none): it
// returns how many may run at once and the memory limit of each, never more
// than perChild.
func Fit(container, perChild int64, parallelism int) (int, int64) {
	if container <= 0 {
		return parallelism, perChild
	}
	budget := container / childShare
	if n := int(budget / minChildMemory); n < parallelism {
		parallelism = max(1, n)
	}
	return parallelism, max(min(perChild, budget/int64(parallelism)), min(perChild, minChildMemory))
}

// Slots bound the render children of the whole process: every Renderer
// (the pull-request flow's, the drift loop's) takes a slot for each child.
type Slots struct {
	free   chan struct{}
	memory int64 // the most memory one child may have; 0: no container limit
}

var (
	once    sync.Once
	process *Slots
)

// Process sizes the process's slots once, from the container's memory
// limit, perChild (the most one child may have) and the CPUs Go may use.
func Process(perChild int64) *Slots {
	once.Do(func() {
		container := ContainerMemory()
		n, mem := Fit(container, perChild, runtime.GOMAXPROCS(0))
		if container == 0 {
			mem = 0
		}
		process = &Slots{free: make(chan struct{}, n), memory: mem}
	})
	return process
}

// Size is how many children may run at once.
func (s *Slots) Size() int { return cap(s.free) }

// Memory is the most memory one child may have; 0 when the container has
// no limit.
func (s *Slots) Memory() int64 { return s.memory }

// Acquire waits for a slot; Release gives it back.
func (s *Slots) Acquire(ctx context.Context) error {
	select {
	case s.free <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release gives a slot back.
func (s *Slots) Release() { <-s.free }
