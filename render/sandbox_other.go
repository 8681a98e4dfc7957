//go:build !linux

package render

import "syscall"

// childProcAttr puts the render child in its own process group (a timeout
// kills the group). Outside Linux no kernel kills it when driftback dies
// first: its CPU limit and the render's time bound end it instead.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
