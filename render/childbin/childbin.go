// Package childbin finds driftback-render, the render child that links
// kustomize alone, beside the running binary. It imports only the
// standard library: driftback version names the child it finds before the
// rest of driftback initialises.
package childbin

import (
	"debug/buildinfo"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
)

// Name is the render child that links kustomize alone, installed beside
// driftback (cmd/driftback-render).
const Name = "driftback-render"

// Find is Name beside the running binary when it is of the same build (see
// Beside), else "": looked for once.
var Find = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	self, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return Beside(filepath.Join(filepath.Dir(exe), Name), self)
})

// Beside returns path when it is a render child that self, the running
// binary's build, may use for overlays: a regular executable file that no
// one but its owner (root or this user) may write, of the same module at
// the same version, commit and link flags, built by the same Go release for
// the same platform from a tree without uncommitted changes, linking each
// module it shares with self at the version self links. Anything else (a
// stale copy left by an earlier install, a file of another program, a
// build of a changed tree, a build that names no module version, commit or
// link flags) gives "", and the renders go to driftback itself. A symbolic
// link is followed, and the file it names checked.
//
// The build information says which build a file is, not that it may be
// trusted: that is its place beside driftback, in a directory only those
// who may replace driftback itself may write (docs/security.md).
func Beside(path string, self *debug.BuildInfo) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 || fi.Mode().Perm()&0o022 != 0 || !ownedHere(fi) {
		return ""
	}
	other, err := buildinfo.ReadFile(real)
	if err != nil || !Same(self, other) {
		return ""
	}
	return real
}

// Same says whether other is of self's build, as Beside needs it.
func Same(self, other *debug.BuildInfo) bool {
	if other.Main.Path != self.Main.Path || other.Main.Version != self.Main.Version || other.GoVersion != self.GoVersion {
		return false
	}
	for _, key := range []string{"vcs.revision", "vcs.modified", "-ldflags", "GOOS", "GOARCH", "CGO_ENABLED"} {
		if setting(self, key) != setting(other, key) {
			return false
		}
	}
	if setting(other, "vcs.modified") == "true" {
		return false // two builds of different changes to one commit look alike
	}
	if v := other.Main.Version; (v == "" || v == "(devel)") && setting(other, "vcs.revision") == "" && setting(other, "-ldflags") == "" {
		// Built outside version control (-buildvcs=false, a source archive)
		// and stamped with nothing: two such builds of different trees look
		// alike.
		return false
	}
	linked := map[string]string{}
	for _, m := range self.Deps {
		linked[m.Path] = version(m)
	}
	for _, m := range other.Deps {
		if v, ok := linked[m.Path]; !ok || v != version(m) {
			return false
		}
	}
	return true
}

func setting(b *debug.BuildInfo, key string) string {
	for _, s := range b.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// version is the version a module is linked at, after replacements, with
// its checksum.
func version(m *debug.Module) string {
	if m.Replace != nil {
		return m.Replace.Path + "@" + m.Replace.Version + " " + m.Replace.Sum
	}
	return m.Version + " " + m.Sum
}
