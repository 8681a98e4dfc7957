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
// binary's build, may use for overlays: a regular executable file of the
// same module at the same version (and commit, when both recorded one),
// built by the same Go release, linking each module it shares with self at
// the version self links. Anything else (a stale copy left by an earlier
// install, a file of another program) gives "", and the renders go to
// driftback itself.
func Beside(path string, self *debug.BuildInfo) string {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return ""
	}
	other, err := buildinfo.ReadFile(path)
	if err != nil || other.Main.Path != self.Main.Path || other.Main.Version != self.Main.Version || other.GoVersion != self.GoVersion {
		return ""
	}
	if a, b := setting(self, "vcs.revision"), setting(other, "vcs.revision"); a != b || setting(self, "vcs.modified") != setting(other, "vcs.modified") {
		return ""
	}
	linked := map[string]string{}
	for _, m := range self.Deps {
		linked[m.Path] = version(m)
	}
	for _, m := range other.Deps {
		if v, ok := linked[m.Path]; !ok || v != version(m) {
			return ""
		}
	}
	return path
}

func setting(b *debug.BuildInfo, key string) string {
	for _, s := range b.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// version is the version a module is linked at, after replacements.
func version(m *debug.Module) string {
	if m.Replace != nil {
		return m.Replace.Path + "@" + m.Replace.Version
	}
	return m.Version
}
