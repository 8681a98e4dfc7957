//go:build unix

package childbin

import (
	"os"
	"syscall"
)

// ownedHere says whether root or this process's user owns the file.
func ownedHere(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (st.Uid == 0 || int(st.Uid) == os.Getuid())
}
