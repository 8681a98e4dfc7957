package slots

import (
	"os"
	"path/filepath"
	"testing"
)

// TestChildrenFitTheContainer proves the render children together never get
// more than half of the container's memory limit: on a 2-core pod with the
// deploy/ limit of 1 GiB one child of 512 MiB runs, where two children of
// 2 GiB each would have let a hostile overlay OOM-kill the pod.
func TestChildrenFitTheContainer(t *testing.T) {
	for _, c := range []struct {
		name                string
		container, perChild int64
		cores               int
		wantN               int
		wantMem             int64
	}{
		{"no limit", 0, 2 << 30, 2, 2, 2 << 30},
		{"1 GiB, 2 cores", 1 << 30, 2 << 30, 2, 1, 512 << 20},
		{"4 GiB, 2 cores", 4 << 30, 2 << 30, 2, 2, 1 << 30},
		{"16 GiB, 4 cores", 16 << 30, 2 << 30, 4, 4, 2 << 30},
		{"512 MiB, 8 cores", 512 << 20, 2 << 30, 8, 1, 512 << 20},
		{"a lower configured limit stays", 8 << 30, 256 << 20, 2, 2, 256 << 20},
	} {
		n, mem := Fit(c.container, c.perChild, c.cores)
		if n != c.wantN || mem != c.wantMem {
			t.Errorf("%s: %d children of %d MiB, want %d of %d MiB", c.name, n, mem>>20, c.wantN, c.wantMem>>20)
		}
		if c.container > 0 && int64(n)*mem > max(c.container/2, minChildMemory) {
			t.Errorf("%s: %d children of %d MiB exceed half of %d MiB", c.name, n, mem>>20, c.container>>20)
		}
	}
}

// TestContainerMemoryReadsCgroups proves the limit is read from cgroup v2
// and v1 files, and that "max" or v1's huge number mean no limit.
func TestContainerMemoryReadsCgroups(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v2, v2max, v1none := write("v2", "1073741824\n"), write("v2max", "max\n"), write("v1", "9223372036854771712\n")
	for _, c := range []struct {
		files []string
		want  int64
	}{
		{[]string{v2}, 1 << 30},
		{[]string{v2max, v2}, 0},
		{[]string{filepath.Join(dir, "absent"), v2}, 1 << 30},
		{[]string{v1none}, 0},
		{nil, 0},
	} {
		if got := containerMemory(c.files); got != c.want {
			t.Errorf("%v: %d, want %d", c.files, got, c.want)
		}
	}
}
