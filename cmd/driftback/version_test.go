package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGoBuildKnowsItsCommit runs `driftback version` of a binary built as
// `go install ./cmd/driftback` builds it in a git checkout: the toolchain's
// record alone gives the commit, with no link-time stamp.
func TestGoBuildKnowsItsCommit(t *testing.T) {
	bin := driftbackBinary(t)
	head, err := exec.Command("git", "-C", filepath.Join("..", ".."), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("driftback version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "commit "+strings.TrimSpace(string(head))) {
		t.Errorf("driftback version does not name the checkout's commit %s:\n%s", head, out)
	}
	if strings.Contains(string(out), "(devel)") {
		t.Errorf("driftback version says (devel) although the toolchain recorded the version:\n%s", out)
	}
}

// TestVersionAndHelpInitialiseNothingElse: `driftback version`, `--help`
// and the completion scripts' first word are answered by quick's init,
// before Helm, client-go, the apiserver's libraries, kustomize or
// driftback's other packages initialise (GODEBUG=inittrace=1 lists each
// package the process initialised), and what they print is what the
// program itself prints.
func TestVersionAndHelpInitialiseNothingElse(t *testing.T) {
	bin := driftbackBinary(t)
	initialised := func(args ...string) (stdout, stderr string, pkgs []string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		for _, m := range initLine.FindAllStringSubmatch(errOut.String(), -1) {
			pkgs = append(pkgs, m[1])
		}
		return out.String(), initLine.ReplaceAllString(errOut.String(), ""), pkgs
	}
	// The whole program: version with a flag is the command's to answer.
	_, _, all := initialised("version", "-h")
	heavy := []string{"helm.sh/", "k8s.io/api/", "k8s.io/apiserver/", "k8s.io/kubernetes/", "k8s.io/client-go/kubernetes",
		"sigs.k8s.io/controller-runtime/pkg/client/apiutil", "sigs.k8s.io/kustomize/", "github.com/driftback/driftback/app",
		"github.com/driftback/driftback/drift", "github.com/driftback/driftback/render"}
	for _, args := range [][]string{{"version"}, {"--version"}, {"--help"}, {"-h"}, {"help"}, {"__complete"}} {
		stdout, stderr, pkgs := initialised(args...)
		var named []string
		for _, p := range pkgs {
			for _, h := range heavy {
				if strings.HasPrefix(p, h) {
					named = append(named, p)
				}
			}
		}
		if len(named) > 0 || len(pkgs) == 0 || len(pkgs) > len(all)/2 {
			t.Errorf("%v initialised %d packages (the program: %d), these among them: %v", args, len(pkgs), len(all), named)
		}
		if strings.Contains(args[0], "version") {
			// The test binary is another build: what TestGoBuildKnowsItsCommit
			// checks of the version, in the lines the program prints.
			if !versionLines.MatchString(stdout) || stderr != "" {
				t.Errorf("%v printed\n%s%s", args, stdout, stderr)
			}
			continue
		}
		wantOut, wantErr, code := runCLI(t, args...)
		if code != exitOK || stdout != wantOut || stderr != wantErr {
			t.Errorf("%v printed\n%s%s\nwhere the program prints (exit %d)\n%s%s", args, stdout, stderr, code, wantOut, wantErr)
		}
	}
}

var (
	initLine     = regexp.MustCompile(`(?m)^init (\S+) @.*\n`)
	versionLines = regexp.MustCompile(`^driftback \S+\ncommit .+\ngo1\.\S+ \w+/\w+\n$`)
)
