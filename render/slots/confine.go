package slots

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// Confine limits the process it runs in, a render child, before it reads
// any untrusted byte: its data to mem bytes (0: no limit), its CPU time to
// total seconds (0: none; on SIGXCPU it exits with cpuExit), no file
// written at all (it reads an in-memory copy only).
func Confine(mem, total int64, cpuExit int) error {
	if mem > 0 {
		if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: uint64(mem), Max: uint64(mem)}); err != nil {
			return fmt.Errorf("limit memory: %w", err)
		}
		// Collect harder as the limit nears, so an honest large render fits.
		debug.SetMemoryLimit(mem / 2)
	}
	if total > 0 {
		if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: uint64(total), Max: uint64(total) + 1}); err != nil {
			return fmt.Errorf("limit CPU: %w", err)
		}
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: 0}); err != nil {
		return fmt.Errorf("limit file size: %w", err)
	}
	// Rendering allocates many short-lived objects; fewer collections are faster
	// and the memory limit above still bounds the heap.
	debug.SetGCPercent(400)
	debug.SetMaxStack(256 << 20)
	xcpu := make(chan os.Signal, 1)
	signal.Notify(xcpu, syscall.SIGXCPU)
	go func() {
		<-xcpu
		os.Exit(cpuExit)
	}()
	return nil
}

// LimitCPU moves the soft CPU limit to the time used so far plus one
// overlay's budget; the kernel signals SIGXCPU when it is reached.
func LimitCPU(seconds int) error {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return err
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_CPU, &lim); err != nil {
		return err
	}
	used := uint64(ru.Utime.Sec + ru.Stime.Sec + 1)
	lim.Cur = min(used+uint64(seconds), lim.Max)
	return syscall.Setrlimit(syscall.RLIMIT_CPU, &lim)
}
