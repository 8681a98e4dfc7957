package render

import "syscall"

// childProcAttr puts the render child in its own process group (a timeout
// kills the group) and has the kernel kill it if driftback dies first.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
